"""How well an LLM judge applies the correction rubric: its verdicts beside the oracle's.

    bash scripts/llamacpp.sh install   # once
    .venv/bin/python benchmarks/llm_judge_agreement.py --out runs/llm-judge [--limit 3]
        [--split easy] [--url http://host:port/v1 --model NAME]

A collection (``ac_train.collect``) with the reference agent (compacting once it has located
the bug) in which the oracle judge corrects, and at every reviewed step an LLM judge
(``ac_train.judge.llm``, schema-constrained JSON) reviews the same view; its verdict is
recorded, never applied, so both judge the same steps. Without ``--url`` the project's
SmolLM2-135M is served by llama.cpp. Prints: answers that were usable verdicts, agreement on
accept/correct with the oracle (and Cohen's kappa), on the oracle's corrections the share the
LLM also corrected and with the same type, on the oracle's accepts the share the LLM
corrected, and seconds per review. Writes ``OUT/pairs.jsonl`` (one line per review) and
``OUT/agreement.json``. Reduced mode (the defaults): 3 easy tasks, about 10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from ac_env.agents.reference import ReferenceAgent
from ac_env.policy import PolicyOutput, SamplingConfig
from ac_train.collect import JUDGE_MAX_NEW_TOKENS, CollectConfig, collect
from ac_train.judge.llm import LLMJudge, ServedVerdicts
from ac_train.judge.oracle import OracleJudge
from ac_train.judge.review import JudgeView, Verdict


class Paired:
    """Implements ``Judge``: the oracle's verdict is applied; the LLM's is recorded beside it."""

    reads_ground_truth = False

    def __init__(self, llm: LLMJudge, pairs: Path) -> None:
        self.oracle = OracleJudge()
        self.llm = llm
        self.pairs = pairs

    def review(self, view: JudgeView, candidate: PolicyOutput) -> Verdict:
        verdict = self.oracle.review(view, candidate)
        rejected = sum(self.llm.rejected.values())
        started = time.monotonic()
        other = self.llm.review(view, candidate)
        record = {
            "task": view.task.instance_id,
            "step": view.step,
            "candidate": view.parse(candidate).kind,
            "oracle": verdict.correction or "accept",
            "llm": other.correction or "accept",
            "usable": sum(self.llm.rejected.values()) == rejected,
            "seconds": round(time.monotonic() - started, 2),
        }
        with self.pairs.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        return verdict


def agreement(records: list[dict]) -> dict[str, float | int | None]:
    n = len(records)
    oracle = [r["oracle"] != "accept" for r in records]
    llm = [r["llm"] != "accept" for r in records]
    agree = sum(a == b for a, b in zip(oracle, llm, strict=True))
    p_o, p_l = sum(oracle) / n, sum(llm) / n
    chance = p_o * p_l + (1 - p_o) * (1 - p_l)
    corrected = [r for r in records if r["oracle"] != "accept"]
    accepted = [r for r in records if r["oracle"] == "accept"]
    return {
        "reviews": n,
        "usable_verdicts": sum(r["usable"] for r in records) / n,
        "decision_agreement": agree / n,
        "kappa": (agree / n - chance) / (1 - chance) if chance < 1 else None,
        "oracle_corrections": len(corrected),
        "llm_also_corrected": (
            sum(r["llm"] != "accept" for r in corrected) / len(corrected) if corrected else None
        ),
        "llm_same_type": (
            sum(r["llm"] == r["oracle"] for r in corrected) / len(corrected) if corrected else None
        ),
        "llm_corrects_an_oracle_accept": (
            sum(r["llm"] != "accept" for r in accepted) / len(accepted) if accepted else None
        ),
        "seconds_per_review": sum(r["seconds"] for r in records) / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/llm-judge"))
    parser.add_argument("--split", default="easy")
    parser.add_argument("--limit", type=int, default=3, help="tasks")
    parser.add_argument("--max-steps", type=int, default=15)
    parser.add_argument("--url", help="an OpenAI-compatible server (default: llama.cpp, SmolLM2)")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--max-chars", type=int, default=6_000, help="history in the request")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    pairs = args.out / "pairs.jsonl"
    pairs.unlink(missing_ok=True)  # a rerun measures afresh: its collection restarts too
    with ExitStack() as stack:
        url = args.url
        if url is None:
            from ac_train.models.checkpoints import smollm2_gguf_path
            from ac_train.models.llamacpp import llamacpp_server

            served = [(smollm2_gguf_path(), args.model)]
            url = stack.enter_context(llamacpp_server(served, threads=args.threads))
        sampling = SamplingConfig(temperature=0.0, max_new_tokens=JUDGE_MAX_NEW_TOKENS)
        llm = LLMJudge(ServedVerdicts.served(url, args.model, sampling), max_chars=args.max_chars)
        config = CollectConfig(
            split=args.split,
            limit=args.limit,
            rollouts_per_task=1,
            worker="reference",
            strategy="learned",
            max_steps=args.max_steps,
        )
        collection = args.out / "collection"
        if collection.exists():
            shutil.rmtree(collection)
        started = time.monotonic()
        collect(config, collection, policy=ReferenceAgent("after_locate"), judge=Paired(llm, pairs))
    records = [json.loads(line) for line in pairs.open()]
    result = {
        **agreement(records),
        "rejected": dict(llm.rejected),
        "pairs": dict(Counter(f"{r['oracle']} -> {r['llm']}" for r in records)),
        "wall_s": round(time.monotonic() - started, 1),
    }
    (args.out / "agreement.json").write_text(json.dumps(result, indent=2) + "\n")
    for key, value in result.items():
        print(f"{key:>32}: {value:.3f}" if isinstance(value, float) else f"{key:>32}: {value}")


if __name__ == "__main__":
    main()
