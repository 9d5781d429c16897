"""An oracle that replays a task's gold patch: the upper bound, and a check of the harness.

It is handed the task (a real policy never is). It applies the gold patch, runs the failing
tests, and submits, deciding each turn from how many turns the observation shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ac_env.policy import PolicyOutput
from ac_env.tasks.model import Task

_DELIMITER = "AUTOCOMPACT_PATCH_END"


class GoldPatchPolicy:
    def __init__(self, task: Task) -> None:
        if _DELIMITER in task.patch:
            raise ValueError(f"task {task.instance_id}: gold patch contains {_DELIMITER}")
        self.task = task

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        turns = sum(1 for m in observation if m["role"] == "assistant")
        if turns == 0:
            command = f"git apply <<'{_DELIMITER}'\n{self.task.patch}{_DELIMITER}"
            return PolicyOutput(text=f"THOUGHT: apply the fix.\n```bash\n{command}\n```")
        if turns == 1 and self.task.FAIL_TO_PASS and not self.task.test_patch:
            tests = " ".join(self.task.FAIL_TO_PASS[:20])
            command = f"python3 -m pytest -q -p no:cacheprovider {tests}"
            return PolicyOutput(text=f"THOUGHT: check the fix.\n```bash\n{command}\n```")
        return PolicyOutput(text="```bash\nsubmit\n```")
