"""``ac_train.integrations.skyrl_trainer`` with SkyRL's own trainer package (``skyrl`` 0.4.0):
the configuration parsed by ``SkyRLTrainConfig.from_cli_overrides``, and whole episodes run by
the real ``SkyRLGymGenerator.agent_loop`` (step-wise), its model replaced by a client that
answers with scripted actions. Each step-wise sample's prompt must be, token for token, the
chat template of the context ``gym.make("AutoCompact-SWE-v0")`` shows on the same seed and
actions, across a compaction; the stock generator's is not.

skyrl 0.4.0 declares Python >= 3.12. On 3.11 it runs when installed with
``--ignore-requires-python`` and with ``typing.TypedDict`` taken from ``typing_extensions``
(pydantic refuses ``typing.TypedDict`` below 3.12; skyrl's own models use it):
``scripts/extra_env.sh skyrl-trainer`` makes that environment. Skipped where skyrl is absent.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import typing
from typing import Any

import pytest

if importlib.util.find_spec("skyrl") is None:
    pytest.skip("the skyrl trainer package is not installed", allow_module_level=True)
if sys.version_info < (3, 12):
    import typing_extensions

    typing.TypedDict = typing_extensions.TypedDict  # type: ignore[misc]

from skyrl.train.config import GeneratorConfig, SkyRLTrainConfig
from skyrl.train.generators.skyrl_gym_generator import SkyRLGymGenerator
from test_skyrl_adapter import CASES, in_process

from ac_env.integrations.skyrl import ENV_CLASS, register
from ac_train.integrations.skyrl_trainer import (
    AutoCompactGenerator,
    AutoCompactSkyRLGymConfig,
    AutoCompactTrainConfig,
)
from ac_train.models.checkpoints import tiny_model_and_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_model_and_tokenizer()[1]


class ScriptedClient:
    """SkyRL's inference client, answering each ``generate`` with the next scripted action."""

    def __init__(self, actions: list[str], tokenizer: Any) -> None:
        self.actions = list(actions)
        self.tokenizer = tokenizer
        self.prompts: list[list[int]] = []

    async def generate(self, engine_input: Any, model: Any = None) -> dict[str, Any]:
        self.prompts.append(list(engine_input["prompt_token_ids"][0]))
        text = self.actions.pop(0)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return {"responses": [text], "response_ids": [ids], "stop_reasons": ["stop"]}

    async def finish_session(self, session_id: str) -> None:
        return None


def run_episode(generator_cls: type, env_config: dict, actions: list[str], tokenizer: Any):
    client = ScriptedClient(actions, tokenizer)
    generator_cfg = GeneratorConfig(step_wise_trajectories=True, max_turns=50)
    generator = generator_cls(
        generator_cfg=generator_cfg,
        skyrl_gym_cfg=AutoCompactSkyRLGymConfig(max_env_workers=0, autocompact=env_config),
        inference_engine_client=client,
        tokenizer=tokenizer,
    )
    output = asyncio.run(
        generator.agent_loop([], ENV_CLASS, {"seed": 1}, max_tokens=256, max_input_length=1_000_000)
    )
    return output, client.prompts


def templated(tokenizer: Any, observation: Any) -> list[int]:
    messages = [dict(message) for message in observation]
    return list(
        tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
    )


def test_the_page_settings_parse_into_the_env_section_and_bad_ones_name_the_field():
    overrides = [
        "environment.skyrl_gym.autocompact.split=easy",
        "environment.skyrl_gym.autocompact.max_steps=6",
        "generator.step_wise_trajectories=true",
    ]
    cfg = AutoCompactTrainConfig.from_cli_overrides(overrides)
    assert cfg.environment.env_class == ENV_CLASS
    assert cfg.environment.skyrl_gym.autocompact == {"split": "easy", "max_steps": 6}
    assert cfg.generator.step_wise_trajectories
    with pytest.raises(ValueError, match="Invalid fields"):  # why the subclass exists
        SkyRLTrainConfig.from_cli_overrides(overrides[:1])
    with pytest.raises(ValueError, match=r"autocompact.*max_steps"):
        AutoCompactTrainConfig.from_cli_overrides(
            ["environment.skyrl_gym.autocompact.max_steps=-1"]
        )


@pytest.mark.parametrize("case", CASES)
def test_each_turn_is_sampled_in_the_envs_context_across_a_compaction(case, tokenizer):
    register()
    env_config, script, _summarizer, grade = CASES[case]
    actions, answers = in_process(1, env_config, script)
    output, prompts = run_episode(AutoCompactGenerator, env_config, actions, tokenizer)

    expected = [templated(tokenizer, answer[0]) for answer in answers[: len(actions)]]
    assert prompts == expected
    steps = output.step_outputs
    assert [step.prompt_ids for step in steps] == expected
    assert any(answer[4]["prefix_rewritten"] for answer in answers[1:])
    # the grade is on the last step; SkyRL gives every step the last step's advantage
    assert [sum(step.reward) for step in steps] == [0.0] * (len(steps) - 1) + [grade]
    for step, action in zip(steps, actions, strict=True):
        trained = [t for t, m in zip(step.response_ids, step.loss_mask, strict=True) if m]
        assert trained == tokenizer.encode(action, add_special_tokens=False)


def test_the_stock_generator_samples_after_a_compaction_in_a_context_the_env_never_showed(
    tokenizer,
):
    register()
    env_config, script, *_ = CASES["proactive"]
    actions, answers = in_process(1, env_config, script)
    _, prompts = run_episode(SkyRLGymGenerator, env_config, actions, tokenizer)
    first = next(i for i, answer in enumerate(answers) if answer[4].get("prefix_rewritten"))
    assert prompts[:first] == [templated(tokenizer, a[0]) for a in answers[:first]]
    assert prompts[first] != templated(tokenizer, answers[first][0])


def test_the_generator_refuses_the_mode_where_a_rewrite_cannot_be_honoured(tokenizer):
    with pytest.raises(ValueError, match="step_wise_trajectories"):
        AutoCompactGenerator(
            generator_cfg=GeneratorConfig(step_wise_trajectories=False),
            skyrl_gym_cfg=AutoCompactSkyRLGymConfig(max_env_workers=0),
            inference_engine_client=ScriptedClient([], tokenizer),
            tokenizer=tokenizer,
        )
