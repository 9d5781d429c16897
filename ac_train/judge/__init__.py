"""The Judge: reviews each proposed step before it executes, and may replace it.

``review`` holds the contract every judge follows (``Judge``, ``JudgeView``, ``Verdict``, the
correction rubric); ``oracle`` and ``llm`` are the two judges; ``evidence`` is what the
execution history shows when a step is proposed.
"""

from ac_train.judge.llm import LLMJudge, ServedVerdicts
from ac_train.judge.oracle import OracleJudge
from ac_train.judge.review import (
    ACCEPT,
    CORRECTION_TYPES,
    Judge,
    JudgeView,
    PrivilegedJudgeView,
    PublicTask,
    Verdict,
    apply_verdict,
    correction_rubric,
    judge_view,
)

__all__ = [
    "ACCEPT",
    "CORRECTION_TYPES",
    "Judge",
    "JudgeView",
    "LLMJudge",
    "OracleJudge",
    "PrivilegedJudgeView",
    "PublicTask",
    "ServedVerdicts",
    "Verdict",
    "apply_verdict",
    "correction_rubric",
    "judge_view",
]
