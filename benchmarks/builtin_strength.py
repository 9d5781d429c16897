"""Verifier strength of the built-in suite, per split: how many generated wrong patches
(``ac_env.tasks.wrong_patches``) the planned tasks' tests reject and accept, from the figures
the catalogue records (``ac_env.tasks.synthetic.strength``, written by ``build_catalog``).

    nice -n 10 .venv/bin/python benchmarks/builtin_strength.py [--regrade]

``--regrade`` grades every planned task's wrong patches again with its domain's suite (one
pytest run per distinct wrong-patched domain, a few minutes) instead of reading the recorded
figures, and lists the wrong patches that the catalogue entries left out of the suite accept.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ac_env.tasks.synthetic.catalog import CatalogEntry, load_catalog  # noqa: E402
from ac_env.tasks.synthetic.domain import load_domain  # noqa: E402
from ac_env.tasks.synthetic.pytest_runs import DEFAULT_TEST_PYTHON  # noqa: E402
from ac_env.tasks.synthetic.strength import (  # noqa: E402
    accepts,
    entry_wrong_patches,
    run_domain,
    with_wrong_patch_figures,
)
from ac_env.tasks.synthetic.suite import plan_suite  # noqa: E402


def regraded(entries: list[CatalogEntry]) -> dict[str, CatalogEntry]:
    catalog = load_catalog()
    result: dict[str, CatalogEntry] = {}
    for name in sorted({entry.domain for entry in entries}):
        mine = [entry for entry in entries if entry.domain == name]
        tests = catalog.domains[name].tests
        graded = with_wrong_patch_figures(
            load_domain(name), mine, tests, DEFAULT_TEST_PYTHON, 2, 60
        )
        result.update({entry.id: entry for entry in graded})
    return result


def accepted_patches(entry: CatalogEntry) -> list[str]:
    """Descriptions of the entry's wrong patches its domain's suite accepts."""
    domain = load_domain(entry.domain)
    tests = load_catalog().domains[entry.domain].tests
    return [
        wrong.description
        for wrong in entry_wrong_patches(domain, entry)
        if not wrong.equivalent
        and accepts(run_domain(domain, wrong.files, DEFAULT_TEST_PYTHON, 60), tests)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regrade", action="store_true")
    args = parser.parse_args()
    plans = plan_suite()
    entries = {plan.entry.id: plan.entry for plan in plans}
    if args.regrade:
        entries = regraded(list(entries.values()))
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for plan in plans:
        entry = entries[plan.entry.id]
        rejected, accepted = entry.wrong_patches_rejected or 0, entry.wrong_patches_accepted or 0
        row = rows[plan.split]
        row[0] += 1
        row[1] += rejected + accepted > 0
        row[2] += rejected + accepted
        row[3] += accepted
        row[4] += accepted > 0
    print(
        f"{'split':16} {'tasks':>5} {'with wrong patches':>18} {'patches':>7} "
        f"{'accepted':>8} {'tasks accepting one':>19}"
    )
    for split, (tasks, with_patches, patches, accepted, weak) in rows.items():
        print(
            f"{split:16} {tasks:>5} {with_patches:>18} {patches:>7} {accepted:>8} "
            f"{weak:>12} ({100 * weak / tasks:4.1f}%)"
        )
    catalog = load_catalog()
    weak_entries = [e for e in catalog.entries if e.wrong_patches_accepted]
    print(
        f"catalogue: {len(catalog.entries)} entries, {len(weak_entries)} never planned "
        "(their suite accepts a wrong patch)"
    )
    if args.regrade:
        for entry in weak_entries:
            for description in accepted_patches(entry):
                print(f"  {entry.id}: {description}")


if __name__ == "__main__":
    main()
