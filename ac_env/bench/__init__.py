"""``ac-bench``: compaction strategies compared under per-task budgets.

``run_benchmark(BenchConfig(...), out_dir)`` runs tasks x strategies x seeds with one worker
(the reference agent, an HF model, an OpenAI-compatible server), once each at the highest
budget; every lower budget's outcome is read from that run (``budgets``). Results go to
``out_dir`` as they come (``episodes.jsonl``, one trajectory file per episode), a rerun resumes,
and ``write_report`` turns them into a markdown table and PNG plots.
"""

from ac_env.bench.config import BenchConfig
from ac_env.bench.report import write_report
from ac_env.bench.runner import run_benchmark
from ac_env.runs.run_dir import ConfigMismatchError

__all__ = ["BenchConfig", "ConfigMismatchError", "run_benchmark", "write_report"]
