"""The problem statement of a mined task, written from the failing behaviour: which test fails,
the test's failing statement (or, where the test can become a standalone script, that
script) and what pytest reported (the assertion or the exception).

A statement never names the bug's file (path, file name, dotted module) and never holds a
line the gold patch changes; a candidate text that would is refused and the next failing test
is tried. None when no failing test gives a clean statement. Exceptions are named by their
class, as a user quoting an error would (``PathAccessError``), not by the dotted path pytest
prints (``boltons.iterutils.PathAccessError``), which would name the module.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ac_env.pytest_log import Failure
from ac_env.tasks.synthetic.statements import CLOSINGS, describe_failure

MAX_ERROR_LINES = 12
MAX_OTHERS = 5
_MIN_LEAK_LINE = 6
_STAR_IMPORT = re.compile(r"^\s*from\s+\S+\s+import\s+\*", re.MULTILINE)
_EXCEPTION_MODULE = re.compile(
    r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt)\b)"
)


@dataclass(frozen=True)
class Secret:
    """What the statement must not contain."""

    file: str
    module: str
    patch: str

    def needles(self) -> list[str]:
        found = [self.file, PurePosixPath(self.file).name]
        if not self.file.endswith("__init__.py"):
            found.append(self.module)
        for line in self.patch.splitlines():
            if line.startswith(("+++", "---")) or not line.startswith(("+", "-")):
                continue
            text = line[1:].strip()
            if len(text) >= _MIN_LEAK_LINE and re.search(r"\w", text):
                found.append(text)
        return found

    def leaks(self, text: str) -> bool:
        return any(needle in text for needle in self.needles())


def by_class_name(failure: Failure) -> Failure:
    """``failure`` with exceptions named by class: ``pkg.mod.BadKey: x`` -> ``BadKey: x``."""
    errors = [_EXCEPTION_MODULE.sub("", line) for line in failure.errors]
    return failure.model_copy(update={"errors": errors})


def display_name(test_id: str) -> str:
    """``tests/test_x.py::TestX::test_y[1]`` -> ``TestX.test_y[1]`` (no file path)."""
    return test_id.split("::", 1)[1].replace("::", ".")


def _topic(test_id: str) -> str:
    """``tests/t.py::SplitWhenTests::test_max_split[1]`` -> ``split when: max split``."""
    *classes, name = test_id.split("::")[1:]
    name = name.split("[", 1)[0]
    words = name.removeprefix("test_").removeprefix("test").strip("_").replace("_", " ") or name
    if not classes:
        return words
    group = re.sub(r"^Test|Tests?$", "", classes[-1]) or classes[-1]
    return f"{re.sub(r'(?<=[a-z0-9])(?=[A-Z])', ' ', group).lower()}: {words}"


def _fence(text: str, language: str = "") -> str:
    return f"```{language}\n{text}\n```"


def _failure_text(test_id: str, failure: Failure) -> str:
    exception = failure.exception
    parts = [
        f"`{display_name(test_id)}` fails"
        + (f" with `{exception}`:" if exception else " on this check:")
    ]
    if failure.statement:
        parts.append(_fence(failure.statement, "python"))
    if failure.errors:
        parts.append("pytest reports:")
        parts.append(_fence("\n".join(failure.errors[:MAX_ERROR_LINES])))
    return "\n\n".join(parts)


def _script_text(repo: Path, test_id: str, failure: Failure) -> str | None:
    """The failing test as a standalone script, where the test allows it."""
    path = repo / test_id.split("::", 1)[0]
    conftest = path.parent / "conftest.py"
    try:
        source = path.read_text(encoding="utf-8")
        if _STAR_IMPORT.search(source):
            return None  # the script could not say where its names come from
        symptom = describe_failure(
            test_id,
            source,
            conftest.read_text(encoding="utf-8") if conftest.is_file() else "",
            failure.statement,
            "\n".join(failure.errors),
        )
    except (OSError, UnicodeDecodeError, SyntaxError):
        return None
    if symptom is None:
        return None
    return "\n\n".join(
        [
            f"`{display_name(test_id)}` fails. The test as a script:",
            _fence(symptom.snippet, "python"),
            f"**Expected:** {symptom.expectation}",
            f"**Actual:** {symptom.observed}",
        ]
    )


def symptom_bodies(repo: Path, test_id: str, failure: Failure) -> list[str]:
    """What a report can say about one failing test, best first: the test as a standalone
    script (where the test allows it), then the failing check and pytest's report."""
    bodies = [_script_text(repo, test_id, failure), _failure_text(test_id, failure)]
    return [body for body in bodies if body is not None]


def write_statement(
    package: str,
    version: str,
    repo: Path,
    fail_to_pass: list[str],
    failures: dict[str, Failure],
    secret: Secret,
    seed: str,
) -> str | None:
    """A bug report about the first failing test that yields a leak-free text."""
    rng = random.Random(seed)
    for test in fail_to_pass:
        failure = by_class_name(failures.get(test, Failure()))
        for body in symptom_bodies(repo, test, failure):
            others = [display_name(t) for t in fail_to_pass if t != test]
            statement = _render(package, version, test, failure, body, others, rng)
            if not secret.leaks(statement):
                return statement
    return None


def _render(
    package: str,
    version: str,
    test: str,
    failure: Failure,
    body: str,
    others: list[str],
    rng: random.Random,
) -> str:
    topic = _topic(test)
    exception = failure.exception
    title = f"{topic} fails with {exception}" if exception else f"{topic} is broken"
    count = len(others) + 1
    opening = (
        f"On a checkout of {package} {version}, running the test suite gives "
        f"{count} failing test{'s' if count > 1 else ''}."
    )
    parts = [f"### {title[:1].upper()}{title[1:]}", opening, body]
    if others:
        shown = ", ".join(f"`{name}`" for name in others[:MAX_OTHERS])
        more = f" and {len(others) - MAX_OTHERS} more" if len(others) > MAX_OTHERS else ""
        parts.append(f"Also failing: {shown}{more}.")
    parts.append("Expected: these tests pass, without changing the tests.")
    closing = rng.choice(CLOSINGS)
    if closing:
        parts.append(closing)
    return "\n\n".join(parts) + "\n"
