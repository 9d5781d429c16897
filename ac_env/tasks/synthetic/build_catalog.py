"""Build ``catalog.json``: run each domain's real tests against every candidate mutant.

    python -m ac_env.tasks.synthetic.build_catalog [--jobs 2] [--max-failing 10]

A mutant is kept when its failing tests are between one and ``--max-failing``, none of them is
a collection error or a time-out, and three runs agree exactly. The unmutated domain must pass
all its tests three times first. Then ``--pairs`` pairs of kept bugs per domain (different
functions, disjoint failing tests) are validated together the same way; a pair is kept when it
breaks exactly the union of its bugs' tests. Last, every kept entry's generated wrong patches
are graded by the domain's suite (``strength``) and the entry records how many it rejects and
accepts.
"""

from __future__ import annotations

import argparse
import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from ac_env.pytest_log import Failure
from ac_env.tasks.synthetic.catalog import (
    CATALOG_PATH,
    Catalog,
    CatalogEntry,
    DomainRecord,
    calls_bug_directly,
    domain_hash,
    single_id,
)
from ac_env.tasks.synthetic.domain import DOMAIN_NAMES, Domain, load_domain
from ac_env.tasks.synthetic.mutations import Mutation, find_mutations
from ac_env.tasks.synthetic.pytest_runs import DEFAULT_TEST_PYTHON, TestRun
from ac_env.tasks.synthetic.strength import buggy_files, run_domain, with_wrong_patch_figures

RUNS = 3


def run_mutant(domain: Domain, mutations: list[Mutation], python: str, timeout_s: float) -> TestRun:
    """Test results of the domain with ``mutations`` applied, in a fresh temp copy."""
    return run_domain(domain, buggy_files(domain, mutations), python, timeout_s)


def baseline_tests(domain: Domain, python: str, timeout_s: float) -> list[str]:
    """The domain's test ids, after checking that all of them pass three times."""
    runs = [run_mutant(domain, [], python, timeout_s) for _ in range(RUNS)]
    for run in runs:
        if run.failing() or run.collection_error or run.timed_out or not run.outcomes:
            raise RuntimeError(
                f"domain {domain.name!r} does not pass its own tests:\n{run.output[-3000:]}"
            )
    tests = sorted(runs[0].outcomes)
    if any(sorted(run.outcomes) != tests for run in runs):
        raise RuntimeError(f"domain {domain.name!r}: test ids differ between runs")
    return tests


def validate_candidate(
    domain: Domain,
    mutations: list[Mutation],
    tests: list[str],
    python: str,
    timeout_s: float,
    max_failing: int,
    expected_failing: set[str] | None = None,
) -> CatalogEntry | None:
    """A catalogue entry for ``mutations`` when they pass the acceptance rules, else None.

    ``expected_failing``: for several bugs, the union of their single failing tests, which
    the combined mutant must reproduce exactly (no interaction between the bugs).
    """
    first = run_mutant(domain, mutations, python, timeout_s)
    failing = first.failing()
    if (
        first.timed_out
        or first.collection_error
        or not 1 <= len(failing) <= max_failing
        or sorted(first.outcomes) != tests
        or (expected_failing is not None and failing != expected_failing)
    ):
        return None
    for _ in range(RUNS - 1):
        again = run_mutant(domain, mutations, python, timeout_s)
        if again.outcomes != first.outcomes:
            return None
    f2p = sorted(failing)
    failures = {test: first.failures.get(test, Failure()) for test in f2p}
    return CatalogEntry(
        id="+".join(single_id(domain.name, m) for m in mutations),
        domain=domain.name,
        mutations=mutations,
        fail_to_pass=f2p,
        failing_statements={test: failure.statement for test, failure in failures.items()},
        failure_messages={test: "\n".join(failure.errors) for test, failure in failures.items()},
    )


def pair_candidates(
    singles: list[CatalogEntry], limit: int, max_failing: int
) -> list[tuple[CatalogEntry, CatalogEntry]]:
    """Up to ``limit`` pairs of single bugs from one subset, in different functions, with
    failing tests that do not overlap and that all reach the bugs through other functions;
    each single bug is used in one pair at most."""
    singles = [
        entry
        for entry in singles
        if not any(calls_bug_directly(entry, test) for test in entry.fail_to_pass)
    ]
    pairs = []
    for index, first in enumerate(singles):
        for second in singles[index + 1 :]:
            a, b = first.mutations[0], second.mutations[0]
            if (a.file, a.function) == (b.file, b.function) or first.subset() != second.subset():
                continue
            if set(first.fail_to_pass) & set(second.fail_to_pass):
                continue
            if len(first.fail_to_pass) + len(second.fail_to_pass) <= max_failing:
                pairs.append((first, second))
    pairs.sort(key=lambda pair: hashlib.sha256(f"{pair[0].id}+{pair[1].id}".encode()).digest())
    chosen: list[tuple[CatalogEntry, CatalogEntry]] = []
    used: set[str] = set()
    for first, second in pairs:
        if len(chosen) == limit:
            break
        if first.id not in used and second.id not in used:
            chosen.append((first, second))
            used.update((first.id, second.id))
    return chosen


def build_domain(
    domain: Domain, python: str, jobs: int, timeout_s: float, max_failing: int, pairs: int
) -> tuple[DomainRecord, list[CatalogEntry]]:
    tests = baseline_tests(domain, python, timeout_s)
    candidates = [
        [m] for path in domain.source_modules() for m in find_mutations(path, domain.files[path])
    ]
    singles = _validate_all(domain, candidates, tests, python, jobs, timeout_s, max_failing)
    chosen = pair_candidates(singles, pairs, max_failing)
    combined = _validate_all(
        domain,
        [[*a.mutations, *b.mutations] for a, b in chosen],
        tests,
        python,
        jobs,
        timeout_s,
        max_failing,
        [set(a.fail_to_pass) | set(b.fail_to_pass) for a, b in chosen],
    )
    record = DomainRecord(source_hash=domain_hash(domain), tests=tests, candidates=len(candidates))
    graded = with_wrong_patch_figures(domain, singles + combined, tests, python, jobs, timeout_s)
    return record, graded


def _validate_all(
    domain: Domain,
    candidates: list[list[Mutation]],
    tests: list[str],
    python: str,
    jobs: int,
    timeout_s: float,
    max_failing: int,
    expected: list[set[str]] | None = None,
) -> list[CatalogEntry]:
    expectations: list[set[str] | None] = list(expected) if expected else [None] * len(candidates)

    def check(index: int) -> CatalogEntry | None:
        return validate_candidate(
            domain, candidates[index], tests, python, timeout_s, max_failing, expectations[index]
        )

    kind = "mutants" if expected is None else "bug pairs"
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(
            tqdm(
                pool.map(check, range(len(candidates))),
                total=len(candidates),
                desc=f"{kind} of {domain.name}",
                unit="mutant",
            )
        )
    return [entry for entry in results if entry is not None]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", nargs="*", default=list(DOMAIN_NAMES))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per pytest run")
    parser.add_argument("--max-failing", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=40, help="two-bug entries per domain")
    parser.add_argument("--python", default=DEFAULT_TEST_PYTHON)
    parser.add_argument("--output", type=Path, default=CATALOG_PATH)
    args = parser.parse_args(argv)
    records: dict[str, DomainRecord] = {}
    entries: list[CatalogEntry] = []
    for name in args.domains:
        record, found = build_domain(
            load_domain(name), args.python, args.jobs, args.timeout, args.max_failing, args.pairs
        )
        records[name] = record
        entries.extend(found)
        pairs = sum(len(entry.mutations) > 1 for entry in found)
        print(
            f"{name}: {len(found) - pairs} of {record.candidates} mutants kept, {pairs} bug "
            f"pairs, {len(record.tests)} tests"
        )
    catalog = Catalog(domains=records, entries=entries)
    staging = args.output.with_name(f".{args.output.name}.tmp")
    staging.write_text(catalog.model_dump_json(indent=1) + "\n")
    staging.replace(args.output)
    print(f"wrote {args.output} ({len(entries)} entries)")


if __name__ == "__main__":
    main()
