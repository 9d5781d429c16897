"""Grading with SWE-bench semantics, hardened against a policy that games the reward.

- ``grader``: the grader (``grade``) and its ``GradeResult``;
- ``patch_filter``: which parts of the agent's diff reach the grader;
- ``runner``: runs the graded tests through the trusted runner and reads its report;
- ``boot``: the trusted runner itself, copied into the grading sandbox (not imported here);
- ``cache``: grades replayed by (task, patch) for a command cache.
"""

from ac_env.grading.grader import MAX_PATCH_BYTES, MISSING, GradeResult, TestGroup, grade

__all__ = ["MAX_PATCH_BYTES", "MISSING", "GradeResult", "TestGroup", "grade"]
