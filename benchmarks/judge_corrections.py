"""The Judge's correction mix, and how often its summaries assert what the history does not show.

    .venv/bin/python benchmarks/judge_corrections.py run --out runs/judge-mix [--limit 20]
        [--split medium] [--policies reference reference-never] [--judges oracle ...]
    .venv/bin/python benchmarks/judge_corrections.py check DIR [DIR ...]

``run`` collects one rollout per task (``ac_train.collect``, judge correcting) for each policy
and judge, into ``OUT/<policy>/<judge>``, then prints the table ``check`` prints. Policies:
``reference``, the model-free agent that compacts once it has located the bug (what the
``reference`` worker does under ``learned``); ``reference-never``, the same agent never
compacting on its own, as the method's base model rarely does before the window fills (it
still answers the length fallback's requests). Judges: ``oracle`` (from the execution history),
``oracle:ground-truth`` (from the gold patch), ``llm:<worker>``.

``check`` reads collection directories made by any version of ``ac-train collect`` (the
previous default judge included: run ``run --collect-only`` with that checkout first on
``PYTHONPATH``, as ``run`` imports nothing the history-only judge added) and prints, per
directory: the
corrections by type (trigger split into *compact now* and *not yet*), their mix beside the
method's 24 / 53 / 23, and the summaries with at least one assertion the history before them
does not show (``ac_train.judge.evidence.unsupported_claims``), for the judge's summaries and the
policy's, with the claim classes found.

Reduced mode (``--limit 3``, both policies, ``oracle``): about 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

SEED_MIX = {"trigger": 0.24, "working_state": 0.53, "continuation": 0.23}
POLICIES = ("reference", "reference-never")


def run(args: argparse.Namespace) -> list[Path]:
    from ac_env.agents.reference import ReferenceAgent
    from ac_train.collect import CollectConfig, collect

    directories = []
    for policy in args.policies:
        for judge in args.judges:
            out = args.out / policy / judge.replace(":", "-").replace("/", "_")
            config = CollectConfig(
                task_source=args.source,
                split=args.split,
                limit=args.limit,
                rollouts_per_task=1,
                worker="reference",
                judge=judge,
                strategy="learned",
                fallback_threshold=args.fallback_threshold,
                max_steps=args.max_steps,
            )
            agent = ReferenceAgent("never" if policy == "reference-never" else "after_locate")
            started = time.monotonic()
            collect(config, out, policy=agent)
            print(f"collected {policy} / {judge} in {time.monotonic() - started:.0f} s -> {out}")
            directories.append(out)
    return directories


def check(directories: list[Path]) -> list[dict]:
    from ac_env.tasks import load_tasks
    from ac_env.trajectory import Trajectory
    from ac_train.judge.evidence import summary_claims

    rows = []
    for directory in directories:
        config = json.loads((directory / "config.json").read_text())
        tasks = {
            t.instance_id: t
            for t in load_tasks(config["task_source"], config["split"], config.get("task_ids"))
        }
        episodes = [json.loads(line) for line in (directory / "episodes.jsonl").open()]
        counts: Counter[str] = Counter()
        summaries = {"judge": [0, 0], "policy": [0, 0]}
        classes: Counter[str] = Counter()
        for episode in episodes:
            for verdict in episode["verdicts"]:
                kind = verdict["correction"]
                if kind == "trigger":
                    kind = (
                        "trigger_now" if "compact now" in verdict["reason"] else "trigger_not_yet"
                    )
                if kind:
                    counts[kind] += 1
            trajectory = Trajectory.read(directory / episode["trajectory"])
            statement = tasks[episode["instance_id"]].problem_statement
            for found in summary_claims(trajectory, statement):
                if found.summarizer not in summaries:
                    continue
                summaries[found.summarizer][0] += 1
                summaries[found.summarizer][1] += bool(found.problems)
                classes.update({p.split(":", 1)[0] for p in found.problems})
        trigger = counts["trigger_now"] + counts["trigger_not_yet"]
        total = trigger + counts["working_state"] + counts["continuation"]
        graded = [e["reward"] for e in episodes if e["reward"] is not None]
        rows.append(
            {
                "directory": str(directory),
                "judge": config["judge"],
                "episodes": len(episodes),
                "success": sum(graded) / len(graded) if graded else None,
                "reviewed": sum(len(e["verdicts"]) for e in episodes),
                "corrections": dict(counts),
                "mix": {
                    "trigger": trigger / total if total else 0.0,
                    "working_state": counts["working_state"] / total if total else 0.0,
                    "continuation": counts["continuation"] / total if total else 0.0,
                },
                "summaries": {
                    k: {"written": n, "unsupported": u} for k, (n, u) in summaries.items()
                },
                "claim_classes": dict(classes),
            }
        )
    return rows


def print_table(rows: list[dict]) -> None:
    seed = " / ".join(f"{100 * SEED_MIX[k]:.0f}" for k in SEED_MIX)
    print(f"\nmix = trigger / working_state / continuation, % (the method's: {seed})")
    header = (
        f"{'collection':<44}{'succ':>6}{'rev':>6}{'now':>5}{'yet':>5}{'ws':>5}{'cont':>6}"
        f"{'mix %':>14}{'judge summ. unsup.':>20}{'policy summ. unsup.':>21}"
    )
    print(header)
    for row in rows:
        c, mix = row["corrections"], row["mix"]
        name = "/".join(Path(row["directory"]).parts[-2:])
        shares = " / ".join(f"{100 * mix[k]:.0f}" for k in SEED_MIX)
        cells = [
            f"{name:<44}",
            f"{row['success']:>6.2f}" if row["success"] is not None else f"{'-':>6}",
            f"{row['reviewed']:>6}",
            f"{c.get('trigger_now', 0):>5}{c.get('trigger_not_yet', 0):>5}",
            f"{c.get('working_state', 0):>5}{c.get('continuation', 0):>6}",
            f"{shares:>14}",
        ]
        for who, width in (("judge", 20), ("policy", 21)):
            s = row["summaries"][who]
            rate = f"{s['unsupported']}/{s['written']}" + (
                f" ({100 * s['unsupported'] / s['written']:.0f}%)" if s["written"] else ""
            )
            cells.append(f"{rate:>{width}}")
        print("".join(cells))
    for row in rows:
        if row["claim_classes"]:
            print(f"  {row['directory']}: unsupported claim classes {row['claim_classes']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    collect_parser = commands.add_parser("run", help="collect, then check")
    collect_parser.add_argument("--out", type=Path, default=Path("runs/judge-mix"))
    collect_parser.add_argument("--source", default="builtin")
    collect_parser.add_argument("--split", default="medium")
    collect_parser.add_argument("--limit", type=int, default=20, help="tasks")
    collect_parser.add_argument("--policies", nargs="+", choices=POLICIES, default=list(POLICIES))
    collect_parser.add_argument("--judges", nargs="+", default=["oracle", "oracle:ground-truth"])
    collect_parser.add_argument("--max-steps", type=int, default=30)
    collect_parser.add_argument("--fallback-threshold", type=int, default=16_384)
    collect_parser.add_argument("--collect-only", action="store_true", help="skip the check")
    check_parser = commands.add_parser("check", help="check collections already made")
    check_parser.add_argument("directories", nargs="+", type=Path)
    check_parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    if args.command == "run":
        directories = run(args)
        if args.collect_only:
            return
        rows = check(directories)
        (args.out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    else:
        rows = check(args.directories)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2) + "\n")
    print_table(rows)


if __name__ == "__main__":
    main()
