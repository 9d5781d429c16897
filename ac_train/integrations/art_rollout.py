"""ART's rollout on AutoCompact: one ``art.Trajectory`` per episode, one history per segment.

    import art
    from ac_train.integrations.art_rollout import AutoCompactScenario, rollout

    groups = await art.gather_trajectory_groups(
        art.TrajectoryGroup(rollout(model, AutoCompactScenario(seed=s)) for _ in range(4))
        for s in range(8)
    )
    await model.train(groups)

``rollout(model, scenario)`` plays one whole episode of ``gym.make("AutoCompact-SWE-v0",
**scenario.env)``, asking ``model.openai_client()`` (ART's inference server) for every turn with
``logprobs=True`` and the env's context as the messages: after a compaction the model sees the
rewritten context. The env's trajectory records each sampled output's token ids when the server
names them (vLLM's ``token_id:N`` log-prob tokens, which ART's server returns).

A compaction rewrites the prefix, so one chat cannot hold the episode. Each segment (the turns
between two rewrites) is one ART ``History``: its context as plain messages, each sampled turn as
the server's ``Choice`` (ART trains a choice's tokens, never a plain message). The last segment
is the trajectory's ``messages_and_choices``, the earlier ones its ``additional_histories`` in
order. ART tokenizes every history on its own with the trajectory's advantage (its
``tokenize_trajectory_groups``), which is how our learner credits segments
(``ac_train.advantages``). Leave ART's ``allow_training_without_logprobs`` off: with it, ART
also trains the plain assistant messages a segment carries over from the previous one
(``keep_recent``), which were sampled, and trained, there.

The reward is the env's grade (``Trajectory.reward``); an episode without one (infrastructure
error) gets 0.0 and ``metadata["infra_error"]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import art
import gymnasium as gym
from art.trajectories import History
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion, ChatCompletionMessage, ChatCompletionTokenLogprob
from openai.types.chat.chat_completion import Choice, ChoiceLogprobs
from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

import ac_env  # noqa: F401  (registers AutoCompact-SWE-v0)
from ac_env.config import parse_config
from ac_env.context import kept_messages
from ac_env.policy import Policy, PolicyOutput
from ac_env.trajectory import Trajectory

ENV_ID = "AutoCompact-SWE-v0"


class AutoCompactScenario(BaseModel):
    """One episode to play: the env, the task, and how each turn is sampled."""

    model_config = ConfigDict(extra="forbid")

    env: dict[str, Any] = Field(
        default_factory=dict, description="gym.make options of AutoCompact-SWE-v0"
    )
    task_id: str | None = Field(default=None, description="this task instead of a drawn one")
    seed: StrictInt | None = Field(default=None, ge=0, description="seeds the task draw")
    temperature: float = Field(default=1.0, ge=0)
    max_tokens: int = Field(default=512, gt=0, description="output tokens per model call")

    @field_validator("env")
    @classmethod
    def _valid_env(cls, env: dict[str, Any]) -> dict[str, Any]:
        parse_config(env)  # a bad setting fails here, naming the field
        return env


@dataclass(frozen=True)
class Episode:
    """One played episode: the env's trajectory and the segments as ART histories."""

    trajectory: Trajectory
    earlier: list[list[Any]]
    """The segments before the last one (each ended by a rewrite)."""
    last: list[Any]

    def art_trajectory(self) -> art.Trajectory:
        """The episode as ART trains it: the last segment as ``messages_and_choices``, the
        earlier ones as ``additional_histories``, the env's grade as the reward."""
        end = self.trajectory.end
        reward = self.trajectory.reward
        metrics: dict[str, float | int | bool] = {
            "compactions": len(self.trajectory.compactions()),
            "segments": len(self.earlier) + 1,
            "steps": len(self.trajectory.model_calls()),
            "graded": reward is not None,
        }
        if end is not None:
            metrics |= {"cost_usd": end.cost.usd, "submitted": end.submitted}
        return art.Trajectory(
            messages_and_choices=self.last,
            additional_histories=[History(messages_and_choices=h) for h in self.earlier],
            reward=0.0 if reward is None else reward,
            metrics=metrics,
            metadata={
                "instance_id": self.trajectory.header.instance_id,
                "infra_error": end.infra_error if end is not None else None,
            },
        )


async def rollout(model: art.Model, scenario: AutoCompactScenario) -> art.Trajectory:
    """One episode through ART's inference client; see the module docstring."""
    episode = await play(model.openai_client(), model.get_inference_name(), scenario)
    return episode.art_trajectory()


async def play(
    client: AsyncOpenAI | PolicyClient, model_name: str, scenario: AutoCompactScenario
) -> Episode:
    """One episode, every turn asked of ``client`` (an OpenAI-compatible chat client)."""
    loop = asyncio.get_running_loop()
    env = await loop.run_in_executor(None, lambda: gym.make(ENV_ID, **scenario.env))
    try:
        task = {"task_id": scenario.task_id} if scenario.task_id is not None else None
        observation, _ = await loop.run_in_executor(
            None, lambda: env.reset(seed=scenario.seed, options=task)
        )
        context = _messages(observation)
        earlier: list[list[Any]] = []
        current: list[Any] = list(context)
        done = False
        while not done:
            completion = await client.chat.completions.create(
                model=model_name,
                messages=context,  # type: ignore[arg-type]
                logprobs=True,
                temperature=scenario.temperature,
                max_tokens=scenario.max_tokens,
            )
            choice = completion.choices[0]
            action = PolicyOutput(
                text=choice.message.content or "", output_token_ids=sampled_token_ids(choice)
            )
            observation, _, terminated, truncated, _ = await loop.run_in_executor(
                None, env.step, action
            )
            done = terminated or truncated
            held = [*context, {"role": "assistant", "content": action.text}]
            context = _messages(observation)
            keep = kept_messages(held, context)
            current.append(choice)
            if keep < len(held):  # a rewrite: the segment ends with this turn
                earlier.append(current)
                current = list(context)
            else:
                current += context[keep:]
        trajectory: Trajectory | None = env.unwrapped.trajectory  # type: ignore[attr-defined]
        if trajectory is None:
            raise RuntimeError("the env recorded no trajectory")
    finally:
        await loop.run_in_executor(None, env.close)
    return Episode(trajectory, earlier, current)


class PolicyClient:
    """An OpenAI-compatible chat client (``client.chat.completions.create``) answered by an
    AutoCompact ``Policy`` (the reference agent, a scripted one), its tokens named as ART's vLLM
    server names them (``token_id:N``, closed by the tokenizer's end-of-turn token): ``play``
    runs without a model server, for a smoke test or a throughput figure."""

    def __init__(self, policy: Policy, tokenizer: Any, end_token: str = "<|im_end|>") -> None:
        self.chat = _Chat(self)
        self.policy = policy
        self.tokenizer = tokenizer
        self.end_id = int(tokenizer.convert_tokens_to_ids(end_token))

    async def _create(self, *, model: str, messages: list[dict[str, str]], **_: Any) -> Any:
        text = self.policy.act(messages).text
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.end_id]
        logprobs = [
            ChatCompletionTokenLogprob(token=f"token_id:{i}", logprob=0.0, top_logprobs=[])
            for i in ids
        ]
        choice = Choice(
            index=0,
            finish_reason="stop",
            message=ChatCompletionMessage(role="assistant", content=text),
            logprobs=ChoiceLogprobs(content=logprobs),
        )
        return ChatCompletion(
            id="policy", choices=[choice], created=0, model=model, object="chat.completion"
        )


class _Chat:
    def __init__(self, client: PolicyClient) -> None:
        self.completions = _Completions(client)


class _Completions:
    def __init__(self, client: PolicyClient) -> None:
        self.create = client._create


def sampled_token_ids(choice: Choice) -> list[int] | None:
    """The sampled token ids when the server names them as ``token_id:N`` (vLLM's
    ``return_tokens_as_token_ids``, ART's server), else None (the env records the text)."""
    content = choice.logprobs.content if choice.logprobs is not None else None
    if not content:
        return None
    ids = []
    for item in content:
        prefix, _, number = item.token.partition(":")
        if prefix != "token_id" or not number.isdigit():
            return None
        ids.append(int(number))
    return ids


def _messages(observation: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    return [{"role": m["role"], "content": m["content"]} for m in observation]


__all__ = [
    "AutoCompactScenario",
    "Episode",
    "PolicyClient",
    "play",
    "rollout",
    "sampled_token_ids",
]
