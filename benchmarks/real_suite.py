"""What the shipped real-code suite holds, per library: tasks per split and subset, how the
bugs spread over files and functions, licence, and the size of the packed data.

    .venv/bin/python benchmarks/real_suite.py [--data DIR]

Reads only the packed data (no repository is materialised). Prints a table; no assertions.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from ac_env.tasks.real.suite import DATA_DIR, read_manifest, read_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    data = parser.parse_args().data
    manifest = read_manifest(data)
    rows = read_rows(data)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    functions: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        counts[row.library][f"{row.task.split}/{row.subset}"] += 1
        if row.task.split == "real" and row.task.ground_truth is not None:
            functions[row.library].update(row.task.ground_truth.functions)
    header = (
        f"{'library':<20}{'licence':<22}{'real tr':>8}{'real ev':>8}{'long tr':>8}"
        f"{'long ev':>8}{'funcs':>6}{'max/fn':>7}{'kB':>6}"
    )
    print(f"suite {manifest.suite_version}: {len(rows)} tasks, {len(manifest.libraries)} libraries")
    print(header)
    total: Counter[str] = Counter()
    for entry in manifest.libraries:
        c = counts[entry.slug]
        total.update(c)
        spread = functions[entry.slug]
        size = (data / f"{entry.slug}.tar.xz").stat().st_size // 1024
        held = " (held out)" if entry.held_out else ""
        print(
            f"{entry.slug:<20}{entry.license[:21]:<22}{c['real/train']:>8}{c['real/eval']:>8}"
            f"{c['long/train']:>8}{c['long/eval']:>8}{len(spread):>6}"
            f"{max(spread.values(), default=0):>7}{size:>6}{held}"
        )
    print(
        f"{'total':<42}{total['real/train']:>8}{total['real/eval']:>8}"
        f"{total['long/train']:>8}{total['long/eval']:>8}"
    )
    packed = sum(path.stat().st_size for path in data.iterdir()) // 1024
    print(f"packed data: {packed} kB in {data}")


if __name__ == "__main__":
    main()
