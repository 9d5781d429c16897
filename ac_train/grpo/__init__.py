"""Segment-aware GRPO: the synchronous trainer (``trainer``), the asynchronous one
(``async_trainer``), the loss (``loss``), the run's configuration and presets (``config``), what
a step reports (``metrics``), and where rollouts start (``start_states``, ``continuation``,
``start_probe``, ``task_draw``). The advantage every segment of a rollout shares is
``ac_train.advantages``.
"""

from ac_train.grpo.async_trainer import AsyncConfig, AsyncGRPOTrainer
from ac_train.grpo.config import GRPO_PRESETS, DemonstrationStarts, GRPOConfig
from ac_train.grpo.metrics import StepMetrics, read_metrics
from ac_train.grpo.trainer import GRPOTrainer

__all__ = [
    "GRPO_PRESETS",
    "AsyncConfig",
    "AsyncGRPOTrainer",
    "DemonstrationStarts",
    "GRPOConfig",
    "GRPOTrainer",
    "StepMetrics",
    "read_metrics",
]
