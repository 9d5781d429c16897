"""``ac-env tasks build``: mine bug-fix tasks from libraries, resumably.

Per library (``<out>/<name>-<version>/``; a bare ``NAME`` is resolved to its latest version
once, recorded in ``<out>/versions.json``): fetch and unpack the sdist into a one-commit
repo, run its suite at baseline in the local sandbox, test candidate mutants one by one (each
line of ``mutants.jsonl`` is one result, written as soon as it is known), and turn each kept
mutant whose behaviour no earlier one had into a task (``made.jsonl``: the task or why it
was dropped), at most ``max_per_function`` tasks per function (candidates of a function that
has them are not tried). ``tasks.jsonl`` is the library's task file; ``<out>/tasks.jsonl``
holds every library's tasks. Snapshot paths in task files are relative to the file.

An interrupted build resumes: the sdist, the repo, the baseline, each tested mutant and each
made task are reused. A library that cannot be mined (no tests in its sdist, a failed
download or build, a suite that does not pass at baseline) gets one line saying why, and the
build moves on; a library that failed before anything was downloaded leaves no directory.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from queue import Queue
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from tqdm import tqdm

from ac_env.mining.baseline import Baseline, BaselineError, run_baseline
from ac_env.mining.candidates import public_mutations, schedule
from ac_env.mining.library import Library, prepare_library
from ac_env.mining.mutants import MutantResult, evaluate_mutant
from ac_env.mining.runner import SuiteRunner, base_task
from ac_env.mining.sdist import Source, SourceError, parse_source, resolve_latest
from ac_env.mining.task import TaskRejected, make_task
from ac_env.paths import safe_child
from ac_env.records import append_jsonl, read_jsonl, write_atomic
from ac_env.sandbox.base import SandboxError
from ac_env.sandbox.local import Isolation
from ac_env.tasks.model import Task
from ac_env.tasks.swebench_file import read_task_file
from ac_env.tasks.synthetic.mutations import Mutation


class BuildOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    out: Path
    max_tasks: int | None = Field(default=None, ge=1, description="tasks per library")
    max_candidates: int | None = Field(default=None, ge=1, description="mutants per library")
    max_failing: int = Field(default=10, ge=1, description="most FAIL_TO_PASS tests per task")
    max_per_function: int = Field(default=3, ge=1, description="tasks per mutated function")
    slow_test_s: float = Field(default=0.25, gt=0, description="tests slower are left out")
    timeout_s: float | None = Field(default=None, gt=0, description="seconds per mutant run")
    jobs: int = Field(default=1, ge=1, description="mutants tested at once")
    seed: int = Field(default=0, description="order in which mutants are tried")
    isolation: Isolation = "bwrap"
    progress: bool = True


class LibraryReport(BaseModel):
    """How one library's build went; ``elapsed_s`` adds up over resumed runs."""

    library: str
    status: Literal["built", "skipped"]
    reason: str = ""
    tests: int = 0
    left_out_tests: int = 0
    ignored_files: int = 0
    """Test files that do not collect at baseline; ``collection_error`` is the first error."""
    collection_error: str = ""
    baseline_s: float = 0.0
    candidates: int = 0
    tried: int = 0
    capped: int = 0
    """Candidates whose function already had ``max_per_function`` tasks: not tried (or, tried
    in the same batch of ``jobs``, kept without a task)."""
    verdicts: dict[str, int] = {}
    duplicates: int = 0
    dropped: dict[str, int] = {}
    tasks: int = 0
    elapsed_s: float = 0.0

    def line(self) -> str:
        if self.status == "skipped":
            return f"{self.library}: skipped: {self.reason}"
        kept = self.verdicts.get("kept", 0)
        ignored = (
            f" (test files that do not collect: {self.ignored_files}, first: "
            f"{self.collection_error})"
            if self.ignored_files
            else ""
        )
        return (
            f"{self.library}: {self.tasks} tasks from {self.tried} of {self.candidates} "
            f"mutants tried ({kept} kept, {self.duplicates} duplicates, "
            f"{sum(self.dropped.values())} dropped), {self.tests} tests{ignored}, baseline "
            f"{self.baseline_s:.1f} s, built in {self.elapsed_s:.0f} s"
        )


class _Made(BaseModel):
    """One line of ``made.jsonl``: a kept mutant's task, or why it did not become one."""

    key: str
    task: Task | None = None
    reason: str = ""


def write_task_file(path: Path, tasks: list[Task]) -> None:
    """A SWE-bench-format JSONL file; snapshot paths relative to the file's directory."""
    lines = []
    for task in tasks:
        row = task.model_dump(mode="json")
        if task.snapshot_dir is not None:
            row["snapshot_dir"] = os.path.relpath(task.snapshot_dir, path.parent)
        lines.append(json.dumps(row))
    write_atomic(path, "".join(f"{line}\n" for line in lines))


class _Mining:
    """The state of one library's build."""

    def __init__(self, library: Library, options: BuildOptions) -> None:
        self.library = library
        self.options = options
        self.mutants_path = library.directory / "mutants.jsonl"
        self.made_path = library.directory / "made.jsonl"
        self.results = {r.key: r for r in read_jsonl(self.mutants_path, MutantResult)}
        self.made = {m.key: m for m in read_jsonl(self.made_path, _Made)}
        self.sources: dict[str, str] = {}

    def source(self, path: str) -> str:
        if path not in self.sources:
            self.sources[path] = (self.library.repo / path).read_text(encoding="utf-8")
        return self.sources[path]

    def baseline(self, runner: SuiteRunner) -> Baseline:
        path = self.library.directory / "baseline.json"
        if path.is_file():
            return Baseline.model_validate_json(path.read_text())
        baseline = run_baseline(runner, slow_test_s=self.options.slow_test_s)
        write_atomic(path, baseline.model_dump_json(indent=1))
        return baseline

    def run(self, report: LibraryReport) -> list[Task]:
        library, options = self.library, self.options
        base = base_task(library.source.slug, library.repo, library.layout.test_files)
        python_path = library.layout.python_path
        first = SuiteRunner(base, python_path, options.isolation)
        runners: Queue[SuiteRunner] = Queue()
        runners.put(first)
        try:
            baseline = self.baseline(first)
            report.tests, report.left_out_tests = len(baseline.tests), len(baseline.deselected)
            report.baseline_s = round(baseline.duration_s, 2)
            report.ignored_files = len(baseline.ignored_files)
            report.collection_error = baseline.collection_error
            timeout_s = options.timeout_s or max(10.0, 4 * baseline.duration_s + 5)
            candidates = schedule(
                public_mutations(library.repo, library.layout.source_modules), options.seed
            )
            report.candidates = len(candidates)
            if options.max_candidates is not None:
                candidates = candidates[: options.max_candidates]
            for _ in range(options.jobs - 1):
                runners.put(SuiteRunner(base, python_path, options.isolation))

            def evaluate(mutation: Mutation) -> MutantResult:
                known = self.results.get(mutation.key())
                if known is not None:
                    return known
                runner = runners.get()
                try:
                    result = evaluate_mutant(
                        runner,
                        baseline,
                        mutation,
                        self.source(mutation.file),
                        max_failing=options.max_failing,
                        timeout_s=timeout_s,
                    )
                finally:
                    runners.put(runner)
                return result

            return self._mine(candidates, evaluate, baseline, report)
        finally:
            while not runners.empty():
                runners.get().close()

    def _mine(
        self,
        candidates: list[Mutation],
        evaluate: Callable[[Mutation], MutantResult],
        baseline: Baseline,
        report: LibraryReport,
    ) -> list[Task]:
        options = self.options
        tasks: list[Task] = []
        seen: set[object] = set()
        verdicts: Counter[str] = Counter()
        dropped: Counter[str] = Counter()
        per_function: Counter[tuple[str, str]] = Counter()
        bar = tqdm(
            total=len(candidates),
            desc=self.library.source.slug,
            unit="mutant",
            disable=not options.progress,
        )

        def uncapped() -> Iterator[Mutation]:
            for mutation in candidates:
                if per_function[(mutation.file, mutation.function)] < options.max_per_function:
                    yield mutation
                else:
                    report.capped += 1
                    bar.update()

        queue = uncapped()
        with bar, ThreadPoolExecutor(max_workers=options.jobs) as pool:
            while options.max_tasks is None or len(tasks) < options.max_tasks:
                batch = list(islice(queue, options.jobs))
                if not batch:
                    break
                results = pool.map(evaluate, batch) if options.jobs > 1 else map(evaluate, batch)
                for result in results:
                    if result.key not in self.results:
                        self.results[result.key] = result
                        append_jsonl(self.mutants_path, result)
                    verdicts[result.verdict] += 1
                    report.tried += 1
                    bar.update()
                    if result.verdict != "kept":
                        continue
                    if result.behaviour() in seen:
                        report.duplicates += 1
                        continue
                    seen.add(result.behaviour())
                    function = (result.mutation.file, result.mutation.function)
                    if options.max_tasks is not None and len(tasks) >= options.max_tasks:
                        continue
                    if per_function[function] >= options.max_per_function:
                        report.capped += 1
                        continue
                    made = self._made(result, baseline)
                    if made.task is None:
                        dropped[made.reason.split(":")[0]] += 1
                    else:
                        tasks.append(made.task)
                        per_function[function] += 1
                    bar.set_postfix(tasks=len(tasks))
        report.verdicts = dict(verdicts)
        report.dropped = dict(dropped)
        report.tasks = len(tasks)
        return tasks

    def _made(self, result: MutantResult, baseline: Baseline) -> _Made:
        known = self.made.get(result.key)
        if known is not None and known.task is not None:
            # snapshots live next to made.jsonl, wherever the build directory has moved
            snapshot = safe_child(self.library.directory, "snapshots", known.task.instance_id)
            known = known.model_copy(
                update={"task": known.task.model_copy(update={"snapshot_dir": snapshot})}
            )
        if known is not None and (known.task is None or _snapshot_ok(known.task)):
            return known
        try:
            made = _Made(
                key=result.key,
                task=make_task(self.library, baseline, result, self.options.isolation),
            )
        except TaskRejected as error:
            made = _Made(key=result.key, reason=str(error))
        self.made[result.key] = made
        append_jsonl(self.made_path, made)
        return made


def _snapshot_ok(task: Task) -> bool:
    return task.snapshot_dir is not None and (task.snapshot_dir / ".git").is_dir()


def build_library(spec: str, options: BuildOptions) -> tuple[LibraryReport, list[Task]]:
    """Mine one library; a library that cannot be mined is reported ``skipped``."""
    started = time.monotonic()
    try:
        source: Source = parse_source(resolve_latest(spec, options.out))
    except (ValueError, SourceError) as error:
        return LibraryReport(library=spec, status="skipped", reason=str(error)), []
    directory = safe_child(options.out, source.slug)
    report_path = directory / "report.json"
    previous = (
        LibraryReport.model_validate_json(report_path.read_text())
        if report_path.is_file()
        else None
    )
    report = LibraryReport(library=f"{source.name} {source.version}", status="built")
    tasks: list[Task] = []
    try:
        library = prepare_library(source, directory)
        tasks = _Mining(library, options).run(report)
        write_task_file(directory / "tasks.jsonl", tasks)
    except (SourceError, BaselineError) as error:
        report = LibraryReport(library=report.library, status="skipped", reason=str(error))
    except (SandboxError, OSError, RuntimeError) as error:
        reason = f"build failed: {type(error).__name__}: {str(error).splitlines()[0]}"
        report = LibraryReport(library=report.library, status="skipped", reason=reason)
    spent = time.monotonic() - started
    report.elapsed_s = round(spent + (previous.elapsed_s if previous else 0.0), 1)
    if report.status == "skipped":
        _remove_empty(directory)
    if directory.is_dir():
        write_atomic(report_path, report.model_dump_json(indent=1))
    return report, tasks


def _remove_empty(directory: Path) -> None:
    """Remove ``directory``'s empty folders (e.g. ``sdist/`` after a failed download), and
    ``directory`` itself when nothing but an earlier report is left."""
    if not directory.is_dir():
        return
    for folder in directory.iterdir():
        if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()
    if {p.name for p in directory.iterdir()} <= {"report.json"}:
        shutil.rmtree(directory)


def build(specs: list[str], options: BuildOptions) -> list[LibraryReport]:
    """Mine every library in ``specs``, print one line per library, and write
    ``<out>/tasks.jsonl`` (every library's tasks under ``out``) and ``<out>/summary.json``."""
    options.out.mkdir(parents=True, exist_ok=True)
    reports = []
    for spec in specs:
        report, _ = build_library(spec, options)
        print(report.line(), flush=True)
        reports.append(report)
    all_tasks = [
        task for path in sorted(options.out.glob("*/tasks.jsonl")) for task in read_task_file(path)
    ]
    write_task_file(options.out / "tasks.jsonl", all_tasks)
    summary = [r.model_dump() for r in _all_reports(options.out)]
    write_atomic(options.out / "summary.json", json.dumps(summary, indent=1) + "\n")
    print(f"{len(all_tasks)} tasks in {options.out / 'tasks.jsonl'}", flush=True)
    return reports


def _all_reports(out: Path) -> list[LibraryReport]:
    return [
        LibraryReport.model_validate_json(path.read_text())
        for path in sorted(out.glob("*/report.json"))
    ]
