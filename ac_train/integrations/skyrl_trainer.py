"""SkyRL's trainer (the ``skyrl`` package) on AutoCompact: its configuration and its generator.

    python -m ac_train.integrations.skyrl_trainer generator.step_wise_trajectories=true \\
        environment.skyrl_gym.autocompact.split=easy trainer.policy.model.path=...

- ``AutoCompactTrainConfig``: SkyRL's ``SkyRLTrainConfig`` whose ``environment.skyrl_gym`` has
  an ``autocompact`` section (the ``gym.make`` keywords of ``AutoCompact-SWE-v0``) and whose
  ``environment.env_class`` defaults to ``"autocompact"``. SkyRL's own ``SkyRLGymConfig``
  refuses unknown sections (``Invalid fields {'autocompact'}``); a bad setting in the section
  fails when the configuration is parsed, naming the field.
- ``AutoCompactGenerator``: SkyRL's ``SkyRLGymGenerator`` in its step-wise mode
  (``generator.step_wise_trajectories=true``: every turn is re-templated from the chat and
  trained as its own sample with the trajectory's advantage), with the one change compaction
  needs: after each step the chat becomes ``chat[:metadata["keep"]] + observations``, the
  env's own context (``ac_env.integrations.skyrl``). The next turn is then sampled, and trained,
  in the context the env showed the model.
- ``main``: SkyRL's PPO entrypoint with these two; also reachable from SkyRL's own entrypoint
  with ``trainer.override_entrypoint=ac_train.integrations.skyrl_trainer``.
"""

# No `from __future__ import annotations`: SkyRL builds nested configs from the fields' real
# (not string) types.
import sys
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from skyrl.train.config import EnvironmentConfig, SkyRLGymConfig, SkyRLTrainConfig
from skyrl.train.generators.skyrl_gym_generator import SkyRLGymGenerator

from ac_env.config import parse_config
from ac_env.integrations.skyrl import ENV_CLASS, AutoCompactTextEnv, register

_KEEP: ContextVar[int | None] = ContextVar("autocompact_keep", default=None)
"""``metadata["keep"]`` of the latest AutoCompact step of the agent loop running in this task."""


@dataclass
class AutoCompactSkyRLGymConfig(SkyRLGymConfig):
    """``environment.skyrl_gym`` with the ``autocompact`` section SkyRL passes to our env."""

    autocompact: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            parse_config(self.autocompact)
        except (TypeError, ValueError) as err:
            raise ValueError(f"environment.skyrl_gym.autocompact: {err}") from err


@dataclass
class AutoCompactEnvironmentConfig(EnvironmentConfig):
    env_class: str = ENV_CLASS
    skyrl_gym: AutoCompactSkyRLGymConfig = field(default_factory=AutoCompactSkyRLGymConfig)


@dataclass
class AutoCompactTrainConfig(SkyRLTrainConfig):
    environment: AutoCompactEnvironmentConfig = field(default_factory=AutoCompactEnvironmentConfig)


class AutoCompactGenerator(SkyRLGymGenerator):
    """SkyRL's generator, step-wise, keeping the chat the env's context at a compaction."""

    def __init__(self, generator_cfg: Any, *args: Any, **kwargs: Any) -> None:
        if not generator_cfg.step_wise_trajectories:
            raise ValueError(
                "generator.step_wise_trajectories: must be true for AutoCompactGenerator (a "
                "compaction rewrites the chat, so each turn is templated from it and trained "
                "as its own sample)"
            )
        register()  # the env class, in the process that makes the environments
        super().__init__(generator_cfg, *args, **kwargs)

    async def _run_in_executor_if_available(
        self, func: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        result = await super()._run_in_executor_if_available(func, *args, **kwargs)
        env = getattr(func, "__self__", None)
        if isinstance(env, AutoCompactTextEnv) and getattr(func, "__name__", "") == "step":
            _KEEP.set(result["metadata"]["keep"])
        return result

    def _update_chat_history(
        self, chat_history: list[dict[str, Any]], output: str, new_obs: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        keep = _KEEP.get()
        _KEEP.set(None)
        chat_history = super()._update_chat_history(chat_history, output, [])
        if keep is not None:
            del chat_history[keep:]
        chat_history += list(new_obs)
        return chat_history


def main(argv: Sequence[str] | None = None) -> None:
    """SkyRL's PPO run with ``AutoCompactTrainConfig`` and ``AutoCompactGenerator``."""
    import ray
    from skyrl.train.entrypoints.main_base import BasePPOExp
    from skyrl.train.utils import initialize_ray, validate_cfg

    overrides = [
        arg
        for arg in (sys.argv[1:] if argv is None else argv)
        if not arg.startswith("trainer.override_entrypoint=")
    ]
    cfg = AutoCompactTrainConfig.from_cli_overrides(overrides)
    validate_cfg(cfg)

    class Experiment(BasePPOExp):
        def get_generator(
            self, cfg: Any, tokenizer: Any, inference_engine_client: Any
        ) -> AutoCompactGenerator:
            from skyrl.backends.skyrl_train.inference_servers.utils import (
                resolve_policy_model_name,
            )

            return AutoCompactGenerator(
                cfg.generator,
                skyrl_gym_cfg=cfg.environment.skyrl_gym,
                inference_engine_client=inference_engine_client,
                tokenizer=tokenizer,
                policy_model_name=resolve_policy_model_name(cfg),
            )

    @ray.remote(num_cpus=1)
    def run(cfg: AutoCompactTrainConfig) -> None:
        Experiment(cfg).run()

    initialize_ray(cfg)
    ray.get(run.remote(cfg))


__all__ = [
    "AutoCompactEnvironmentConfig",
    "AutoCompactGenerator",
    "AutoCompactSkyRLGymConfig",
    "AutoCompactTrainConfig",
    "main",
]

if __name__ == "__main__":
    main()
