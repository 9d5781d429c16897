"""The impossible split per source: how many tasks have a variant, and what the gold patch
gets on them (it must get 0 on every one: a pass would mean the contradiction missed).

    nice -n 10 .venv/bin/python benchmarks/impossible_split.py [--sources builtin real]
        [--sample N]

The gold patch is graded on each variant's FAIL_TO_PASS tests alone (the contradicted test is
one of them, so a patch that fails it gets 0 from the full grading too). ``--sample N`` grades
the first N variants of each source in a fixed hashed order. The cheating rate of the built-in
strategies comes from ``ac-bench --split impossible`` (its report's "Cheating rate" table).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections import Counter
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ac_env.grading import grade  # noqa: E402
from ac_env.sandbox.local import LocalSandbox  # noqa: E402
from ac_env.tasks import IMPOSSIBLE, load_tasks  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", nargs="+", default=["builtin", "real"])
    parser.add_argument("--sample", type=int, default=None, help="variants graded per source")
    args = parser.parse_args()
    for source in args.sources:
        started = time.monotonic()
        tasks = load_tasks(source)
        variants = load_tasks(source, IMPOSSIBLE)
        made = time.monotonic() - started
        by_split = Counter(t.split for t in tasks)
        variant_of = {v.instance_id.split("__", 1)[1] for v in variants}
        have = Counter(t.split for t in tasks if t.instance_id in variant_of)
        splits = ", ".join(f"{s} {have[s]}/{n}" for s, n in sorted(by_split.items()))
        held_out = len(load_tasks(source, IMPOSSIBLE, subset="eval"))
        print(
            f"{source}: {len(variants)} impossible tasks of {len(tasks)} ({splits}; "
            f"held-out eval subset {held_out}); loaded in {made:.0f} s"
        )
        chosen = sorted(variants, key=lambda t: hashlib.sha256(t.instance_id.encode()).digest())
        chosen = chosen[: args.sample] if args.sample else variants
        outcomes: Counter[str] = Counter()
        for task in tqdm(chosen, desc=f"gold on {source}", unit="task", leave=False):
            quick = task.model_copy(update={"PASS_TO_PASS": [], "test_order": []})
            result = grade(quick, task.patch, LocalSandbox())
            outcomes["infra" if result.reward is None else f"reward {result.reward:g}"] += 1
            if result.reward == 1.0:
                print(f"  gold passes {task.instance_id}")
        print(f"  gold patch on {len(chosen)} of them: {dict(sorted(outcomes.items()))}")


if __name__ == "__main__":
    main()
