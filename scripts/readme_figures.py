"""The README's result tables, rendered from the files under ``docs/results/``.

Each table in README.md stands between ``<!-- results:NAME -->`` and ``<!-- /results -->``,
and ``RENDERERS[NAME]`` makes it from its results file. A rerun updates one place: write the
new results file, then

    .venv/bin/python scripts/readme_figures.py --write

rewrites the README's tables; ``tests/test_readme_figures.py`` fails while they disagree.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- results:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /results -->)", re.S)


def _load(name: str) -> Any:
    return json.loads((RESULTS / name).read_text())


def _interval(estimate: dict[str, float], percent: bool = True) -> str:
    scale, unit = (100, "%") if percent else (1, "")
    mean, low, high = (estimate[k] * scale for k in ("mean", "low", "high"))
    if low == high == mean:
        return f"{mean:.0f}{unit}"
    return f"{mean:.0f}{unit} [{low:.0f}, {high:.0f}]"


def bench_main() -> str:
    """The main job's success per strategy and budget (``docs/results/bench_main.json``, the
    run's ``summary.json``), with the mean cost per episode at the largest budget."""
    summary = _load("bench_main.json")
    budgets = sorted({cell["budget"] for cell in summary["cells"]})
    strategies = list(dict.fromkeys(cell["strategy"] for cell in summary["cells"]))
    cells = {(c["strategy"], c["budget"]): c for c in summary["cells"]}
    header = ["strategy", *(f"${b:g}" for b in budgets), f"cost per episode at ${budgets[-1]:g}"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for strategy in strategies:
        row = [f"`{strategy}`"]
        row += [_interval(cells[(strategy, b)]["success"]) for b in budgets]
        row.append(f"${cells[(strategy, budgets[-1])]['cost_usd']['mean']:.3f}")
        lines.append("| " + " | ".join(row) + " |")
    tasks = len(summary["config"]["task_ids"] or [])
    window = summary["config"]["context_window"]
    lines.append("")
    lines.append(
        f"Success rate over {tasks} tasks (95% bootstrap interval) at each budget in USD, "
        f"{window:,}-token context window; source: `docs/results/bench_main.json`."
    )
    return "\n".join(lines)


def grpo_sitting() -> str:
    """Held-out success before and after GRPO, per depth
    (``docs/results/grpo_sitting_run_cpu.json``)."""
    run = _load("grpo_sitting_run_cpu.json")
    lines = [
        "| held-out start states | before | after | after - before (paired) |",
        "|---|---|---|---|",
    ]
    for name, figures in run["success"].items():
        label = "all" if name == "all" else name.replace("steps_left=", "depth ")
        lines.append(
            f"| {label} (n={figures['before']['n']}) | {_interval(figures['before'])} | "
            f"{_interval(figures['after'])} | {_interval(figures['after - before'])} |"
        )
    wall = run["cost"]["wall_s"]
    informative = sum(1 for step in run["curve"] if step["informative_groups"] > 0)
    lines.append("")
    lines.append(
        f"{len(run['curve'])} GRPO steps ({informative} with an informative group), "
        f"{run['cost']['elapsed_s'] / 60:.0f} minutes on 2 CPU cores (GRPO "
        f"{wall['grpo'] / 60:.0f}); source: `docs/results/grpo_sitting_run_cpu.json`."
    )
    return "\n".join(lines)


RENDERERS: dict[str, Callable[[], str]] = {
    "bench_main": bench_main,
    "grpo_sitting": grpo_sitting,
}


def rendered(readme: str) -> str:
    """``readme`` with every results block made anew from its file."""

    def block(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in RENDERERS:
            raise KeyError(f"README.md: results block {name!r} has no renderer")
        return f"{match.group(1)}{RENDERERS[name]()}\n{match.group(4)}"

    return BLOCK.sub(block, readme)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite README.md's tables")
    args = parser.parse_args()
    text = README.read_text()
    new = rendered(text)
    if args.write:
        README.write_text(new)
        print("README.md: tables rewritten" if new != text else "README.md: up to date")
    else:
        print(new)


if __name__ == "__main__":
    main()
