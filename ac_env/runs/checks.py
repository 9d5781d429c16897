"""The checks a run of episodes makes before its first episode and before anything is
written: each task's test_command a pytest invocation the grader can run, the env keywords and
their pricing preset, the sandbox (bubblewrap installed, a Docker daemon answering and holding
every task's image), the worker (an HTTP model server answering one probe request). A failure
is one ``ConfigurationError`` line naming what to fix; a caller that runs them all first (the
benchmark: ``ac_env.bench.validate``, ``ac-train collect``) writes nothing for a run that
cannot work, so fixing a typo and rerunning just works.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ac_env.agents.errors import ModelServerError
from ac_env.agents.http import probe_server
from ac_env.config import parse_config
from ac_env.cost import make_pricing
from ac_env.grading.runner import RunnerCommandError, parse_test_command
from ac_env.sandbox import make_sandbox_factory, sandbox_backend
from ac_env.sandbox.base import SandboxError
from ac_env.tasks import Task

T = TypeVar("T")


class ConfigurationError(ValueError):
    """A run's configuration cannot work; the message is one line naming the setting."""

    def __init__(self, setting: str, problem: object) -> None:
        super().__init__(" ".join(f"{setting}: {problem}".split()))


def check_env_kwargs(kwargs: dict[str, Any]) -> None:
    """The env keywords parse, and the pricing they name exists."""
    checked("env", lambda: parse_config(kwargs))
    pricing = kwargs.get("pricing")
    if isinstance(pricing, str):
        checked("pricing", lambda: make_pricing(pricing))


def check_test_commands(tasks: list[Task]) -> None:
    """Every task's ``test_command`` is one the grader runs (a pytest invocation)."""
    for task in tasks:
        try:
            parse_test_command(task.test_command)
        except RunnerCommandError as error:
            raise ValueError(f"task {task.instance_id}: {error}") from None


def check_sandbox(spec: str, tasks: Sequence[Task] = ()) -> None:
    """The sandbox can run here (``SANDBOXES``: bubblewrap installed, a Docker daemon
    answering) and its backend has no problem with ``tasks`` (Docker: every image on the
    daemon; nothing is pulled)."""
    checked("sandbox", lambda: make_sandbox_factory(spec))
    problem = checked("sandbox", lambda: sandbox_backend(spec).problem_with(tasks))
    if problem is not None:
        raise ConfigurationError("sandbox", problem)


def check_worker_usable(setting: str, worker: str) -> None:
    """``reference``; ``hf:...`` with the training extra installed; ``openai:<model>@<url>``
    with a server there that answers one probe request and serves the model."""
    if worker.startswith("hf:"):
        if importlib.util.find_spec("torch") is None:
            raise ConfigurationError(setting, f"{worker} needs torch (the 'train' extra)")
        return
    if worker.startswith("openai:"):
        model, _, url = worker.removeprefix("openai:").partition("@")
        if not model or not url.startswith(("http://", "https://")):
            raise ConfigurationError(setting, f"{worker!r} is not openai:<model>@<http(s) url>")
        try:
            probe_server(url, model)
        except ModelServerError as error:
            problem = f"the model server does not answer: {error}"
            raise ConfigurationError(setting, problem) from None
        return
    if worker != "reference":
        raise ConfigurationError(setting, f"unknown worker {worker!r}")


def checked(setting: str, check: Callable[[], T]) -> T:
    """``check()``, its ValueError or SandboxError turned into a ``ConfigurationError``."""
    try:
        return check()
    except ConfigurationError:
        raise
    except (ValueError, SandboxError) as error:
        raise ConfigurationError(setting, error) from None
