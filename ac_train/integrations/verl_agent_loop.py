"""verl's agent loop on AutoCompact: one training output per compaction segment.

    # agent_loops.yaml, given to verl as actor_rollout_ref.rollout.agent.agent_loop_config_path
    - name: autocompact
      _target_: ac_train.integrations.verl_agent_loop.AutoCompactAgentLoop
      env: {split: easy, max_steps: 30}

Importing this module also registers the loop under ``"autocompact"`` (verl's ``@register``);
a dataset row picks it with ``agent_name: autocompact`` and chooses its episode with
``extra_info: {task_id: ..., seed: ...}`` (``EpisodeChoice``).

``AutoCompactAgentLoop.run`` plays one whole episode of ``gym.make("AutoCompact-SWE-v0",
**env)`` with verl's rollout server: every turn's prompt is the chat template of the context
the env shows (so after a compaction the model sees the rewritten context, never an appended
one), sampled token-in/token-out through ``server_manager.generate``. The episode's trajectory
is cut with our segmenter (``ac_train.segments.segment_trajectory``) and returned as a list of
``AgentLoopOutput``, one per segment, in order: ``prompt_ids`` up to the segment's first model
output, ``response_ids`` the rest, ``response_mask`` 1 on the tokens the policy sampled (the
segmenter's GRPO mask), the sampler's log-probs where it gave them.

How the segments share the reward. verl's multi-output path is its v1 trainer
(``verl.trainer.ppo.v1``): ``AgentLoopWorkerTQ`` stores output ``i`` of session ``s`` of prompt
``uid`` under ``{uid}_{s}_{i}`` and copies the last output's ``reward_score`` to the earlier ones;
``compute_advantage_for_multi_trajectories`` computes GRPO over each session's final output only
and broadcasts that advantage to every output of the session. Every segment of an episode thus
trains with the episode's advantage, as ``ac_train.advantages.segment_group`` does (verl's GRPO
divides by the group's sample std, ours by the population std: the same sign and ranking). The
reward is the env's grade (``Trajectory.reward``); an episode without a grade (infrastructure
error) scores 0.0 and says so in ``extra_fields["infra_error"]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from uuid import uuid4

import gymnasium as gym
import hydra
from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, Field, StrictInt
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    DictConfigWrap,
    _agent_loop_registry,
    register,
)
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.llm_server import LLMServerClient
from verl.workers.rollout.replica import TokenOutput

import ac_env  # noqa: F401  (registers AutoCompact-SWE-v0)
from ac_env.config import parse_config
from ac_env.policy import Policy, PolicyOutput
from ac_env.tokens import HFTokenCounter
from ac_env.trajectory import Trajectory
from ac_train.segments import ChatRenderer, Segment, segment_trajectory

AGENT_NAME = "autocompact"
ENV_ID = "AutoCompact-SWE-v0"


class EpisodeChoice(BaseModel):
    """The dataset row's ``extra_info`` fields this loop reads (others are ignored)."""

    model_config = ConfigDict(extra="ignore")

    task_id: str | None = Field(default=None, description="this task instead of a drawn one")
    seed: StrictInt | None = Field(default=None, ge=0, description="seeds the task draw")


@register(AGENT_NAME)
class AutoCompactAgentLoop(AgentLoopBase):
    """One AutoCompact episode per ``run``; see the module docstring.

    Args (besides verl's own): ``env``, the ``gym.make`` keywords of ``AutoCompact-SWE-v0``
    (``ac_env.config.EnvConfig``'s fields; the token counter is the policy's tokenizer), from the
    loop's entry in verl's agent-loop YAML.
    """

    def __init__(self, *args: Any, env: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if isinstance(env, DictConfig):
            env = OmegaConf.to_container(env, resolve=True)  # type: ignore[assignment]
        self.env_config: dict[str, Any] = {str(k): v for k, v in (env or {}).items()}
        if "token_counter" in self.env_config:
            raise ValueError("env.token_counter: set by the loop (the policy's tokenizer)")
        parse_config(self.env_config)  # a bad setting fails here, naming the field
        self.renderer = ChatRenderer(self.tokenizer)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> list[AgentLoopOutput]:
        choice = EpisodeChoice.model_validate(dict(kwargs.get("extra_info") or {}))
        trajectory = await self.play(choice, sampling_params)
        return self.outputs(trajectory)

    def outputs(self, trajectory: Trajectory) -> list[AgentLoopOutput]:
        """The episode's segments as verl outputs (reward on each: the episode's grade)."""
        segments = segment_trajectory(
            trajectory, self.tokenizer, run_id=uuid4().hex[:12], prefix_mismatch="split"
        )
        reward = trajectory.reward
        extra: dict[str, Any] = {
            "instance_id": trajectory.header.instance_id,
            "compactions": len(trajectory.compactions()),
            "infra_error": trajectory.end.infra_error if trajectory.end is not None else None,
        }
        return [
            segment_output(
                segment, 0.0 if reward is None else reward, len(segments), extra | {"segment": i}
            )
            for i, segment in enumerate(segments)
        ]

    async def play(self, choice: EpisodeChoice, sampling_params: dict[str, Any]) -> Trajectory:
        """The episode's trajectory (``run`` cuts it into outputs)."""
        loop = asyncio.get_running_loop()
        env = await loop.run_in_executor(None, self._make_env)
        try:
            task = {"task_id": choice.task_id} if choice.task_id is not None else None
            observation, _ = await loop.run_in_executor(
                None, lambda: env.reset(seed=choice.seed, options=task)
            )
            request_id = uuid4().hex
            done = False
            while not done:
                prompt_ids = self.renderer.prompt_ids(observation)
                sampled = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=prompt_ids, sampling_params=sampling_params
                )
                action = PolicyOutput(
                    text=self.tokenizer.decode(sampled.token_ids, skip_special_tokens=True),
                    prompt_token_ids=prompt_ids,
                    output_token_ids=list(sampled.token_ids),
                    output_logprobs=list(sampled.log_probs) if sampled.log_probs else None,
                )
                observation, _, terminated, truncated, _ = await loop.run_in_executor(
                    None, env.step, action
                )
                done = terminated or truncated
            trajectory: Trajectory | None = env.unwrapped.trajectory  # type: ignore[attr-defined]
            if trajectory is None:
                raise RuntimeError("the env recorded no trajectory")
            return trajectory
        finally:
            await loop.run_in_executor(None, env.close)

    def _make_env(self) -> gym.Env[Any, Any]:
        return gym.make(ENV_ID, token_counter=HFTokenCounter(self.tokenizer), **self.env_config)


class PolicyServer:
    """verl's rollout-server interface (``generate(prompt_ids, sampling_params) -> TokenOutput``,
    reached as a Ray actor's ``generate.remote``) answered by an AutoCompact ``Policy`` (the
    reference agent, a scripted one): the whole loop runs without a model server, for a smoke
    test or a throughput figure. The prompt is read back into chat messages from a ChatML
    template (``<|im_start|>role\ncontent<|im_end|>``, SmolLM2's and Qwen's); the answer is the
    policy's text, tokenized, with ``<|im_end|>`` closing it."""

    def __init__(self, policy: Policy, tokenizer: Any) -> None:
        self.policy = policy
        self.tokenizer = tokenizer
        self.end_id = int(tokenizer.convert_tokens_to_ids("<|im_end|>"))
        self.generate = _RemoteMethod(self._generate)

    async def _generate(self, *, prompt_ids: list[int], **_: Any) -> TokenOutput:
        messages = chatml_messages(self.tokenizer.decode(prompt_ids, skip_special_tokens=False))
        text = self.policy.act(messages).text
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.end_id]
        return TokenOutput(token_ids=ids, stop_reason="completed")


class _RemoteMethod:
    def __init__(self, method: Any) -> None:
        self.remote = method


class LocalServerClient(LLMServerClient):
    """verl's ``LLMServerClient`` with its load balancer (a Ray actor choosing among rollout
    replicas) replaced by one in-process server, such as ``PolicyServer``."""

    def __init__(self, config: Any, server: Any) -> None:
        super().__init__(config)
        self.server = server

    async def _acquire_server(self, request_id: str, **extra: Any) -> tuple[str, Any]:
        return "local", self.server

    def _release_server(self, server_id: str, request_id: str | None = None) -> None:
        return None


def local_agent_loop(
    policy: Policy,
    tokenizer: Any,
    env: Mapping[str, Any] | None = None,
    *,
    prompt_length: int = 32768,
    response_length: int = 32768,
) -> AutoCompactAgentLoop:
    """The loop as verl's ``AgentLoopWorker`` builds it (from verl's agent-loop registry, by
    ``hydra.utils.instantiate``), its server a ``PolicyServer`` of ``policy``: one episode
    (``asyncio.run(loop.run(sampling_params, raw_prompt=[], extra_info={"seed": 0}))``) runs
    on a CPU, outside a trainer."""
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "name": "vllm",
                    "prompt_length": prompt_length,
                    "response_length": response_length,
                }
            },
            "data": {},
        }
    )
    loop = hydra.utils.instantiate(
        config=_agent_loop_registry[AGENT_NAME] | {"env": dict(env or {})},
        trainer_config=DictConfigWrap(config=config),
        server_manager=LocalServerClient(config, PolicyServer(policy, tokenizer)),
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
    )
    assert isinstance(loop, AutoCompactAgentLoop)
    return loop


def chatml_messages(text: str) -> list[dict[str, str]]:
    """The messages of a ChatML prompt (ending with the open assistant turn)."""
    parts = text.split("<|im_start|>")
    if parts[0].strip() or len(parts) < 2 or parts[-1].strip() != "assistant":
        raise ValueError("prompt: not a ChatML chat ending with an open assistant turn")
    messages = []
    for part in parts[1:-1]:
        role, _, rest = part.partition("\n")
        content, ended, _ = rest.partition("<|im_end|>")
        if not ended:
            raise ValueError(f"prompt: a {role!r} message without <|im_end|>")
        messages.append({"role": role, "content": content})
    return messages


def segment_output(
    segment: Segment, reward: float, num_segments: int, extra_fields: dict[str, Any]
) -> AgentLoopOutput:
    """One segment as a verl output: the prompt is everything before its first model output."""
    start = segment.outputs[0].start
    mask = segment.grpo_mask()[start:]
    logprobs = segment.behaviour_logprobs[start:]
    recorded = any(lp is not None for lp in logprobs)
    return AgentLoopOutput(
        prompt_ids=segment.input_ids[:start],
        response_ids=segment.input_ids[start:],
        response_mask=[int(m) for m in mask],
        response_logprobs=[0.0 if lp is None else lp for lp in logprobs] if recorded else None,
        reward_score=reward,
        num_turns=2 * len(segment.outputs),
        metrics=AgentLoopMetrics(),
        extra_fields={**extra_fields, "num_segments": num_segments},
    )


__all__ = [
    "AGENT_NAME",
    "AutoCompactAgentLoop",
    "EpisodeChoice",
    "LocalServerClient",
    "PolicyServer",
    "chatml_messages",
    "local_agent_loop",
    "segment_output",
]
