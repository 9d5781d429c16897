"""Which generated wrong patches a catalogued bug's tests reject.

A built-in task's tests are its domain's whole suite, and its gold patch undoes the entry's
mutations, so a task's wrong patches (``ac_env.tasks.wrong_patches``: near misses at the bug
site, gold minus one hunk) are the same for every task made from one entry. Each distinct
wrong-patched domain runs the suite once; a wrong patch is rejected when one test fails (or
the run times out or cannot collect), accepted when every test passes. One that parses to the
same AST as the gold-patched files is provably equivalent and counts as neither.
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from ac_env.pytest_log import Outcome
from ac_env.tasks.synthetic.catalog import CatalogEntry
from ac_env.tasks.synthetic.domain import Domain, write_files
from ac_env.tasks.synthetic.mutations import Mutation, apply_mutations
from ac_env.tasks.synthetic.project import unified_diff
from ac_env.tasks.synthetic.pytest_runs import TestRun, run_pytest
from ac_env.tasks.wrong_patches import WrongPatch, wrong_patches_of


def run_domain(domain: Domain, changed: dict[str, str], python: str, timeout_s: float) -> TestRun:
    """The domain's whole suite with ``changed`` (path -> text) in place, in a temp copy."""
    with tempfile.TemporaryDirectory(prefix="ac-domain-") as tmp:
        write_files({**domain.files, **changed}, Path(tmp))
        return run_pytest(Path(tmp), python=python, timeout_s=timeout_s)


def buggy_files(domain: Domain, mutations: list[Mutation]) -> dict[str, str]:
    """The files ``mutations`` change, as the bugs leave them."""
    return {
        path: apply_mutations(domain.files[path], [m for m in mutations if m.file == path])
        for path in sorted({m.file for m in mutations})
    }


def entry_wrong_patches(domain: Domain, entry: CatalogEntry) -> list[WrongPatch]:
    """The wrong patches of every task made from ``entry``."""
    buggy = buggy_files(domain, entry.mutations)
    gold = "".join(unified_diff(path, text, domain.files[path]) for path, text in buggy.items())
    return wrong_patches_of(gold, buggy)


def accepts(run: TestRun, tests: list[str]) -> bool:
    """Whether a suite run passes every one of ``tests``."""
    return (
        not run.timed_out
        and not run.collection_error
        and all(run.outcomes.get(test) == Outcome.PASSED for test in tests)
    )


def with_wrong_patch_figures(
    domain: Domain,
    entries: list[CatalogEntry],
    tests: list[str],
    python: str,
    jobs: int,
    timeout_s: float,
) -> list[CatalogEntry]:
    """``entries`` with ``wrong_patches_rejected`` and ``wrong_patches_accepted`` set."""
    patches = {entry.id: entry_wrong_patches(domain, entry) for entry in entries}
    distinct = {
        tuple(sorted(wrong.files.items()))
        for found in patches.values()
        for wrong in found
        if not wrong.equivalent
    }

    def verdict(files: tuple[tuple[str, str], ...]) -> bool:
        return accepts(run_domain(domain, dict(files), python, timeout_s), tests)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        ordered = sorted(distinct)
        verdicts = dict(
            zip(
                ordered,
                tqdm(
                    pool.map(verdict, ordered),
                    total=len(ordered),
                    desc=f"wrong patches of {domain.name}",
                    unit="patch",
                ),
                strict=True,
            )
        )
    updated = []
    for entry in entries:
        graded = [
            verdicts[tuple(sorted(w.files.items()))] for w in patches[entry.id] if not w.equivalent
        ]
        updated.append(
            entry.model_copy(
                update={
                    "wrong_patches_rejected": graded.count(False),
                    "wrong_patches_accepted": graded.count(True),
                }
            )
        )
    return updated
