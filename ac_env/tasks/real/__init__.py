"""The real-code suite shipped in the package: bugs mined from real Python libraries.

``load_tasks("real", split=...)`` (or ``gym.make("AutoCompact-SWE-v0", task_source="real")``)
reads it offline: split ``real`` holds one bug per task, split ``long`` several bugs in
different functions of one library (bugs the reference agent fixes alone); subsets ``train``
and ``eval`` hold out whole libraries as well as tasks. The data (``data/``) is one base tree
per library (its sdist, licence included) and one gold patch per task; ``suite`` writes each
task's repository into the cache on first use. ``ac-env tasks pack`` writes the data from a
mining build; ``scripts/build_real_suite.sh`` rebuilds it from PyPI.
"""

from __future__ import annotations

from ac_env.tasks.real.suite import SuiteDataError, real_tasks

__all__ = ["SuiteDataError", "real_tasks"]
