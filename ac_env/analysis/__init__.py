"""Figures read from finished trajectories, shared by the benchmark (``ac-bench``), collection
(``ac-train collect``), the judges and trainer adapters:

- ``metrics``: per-episode figures (cost split, compactions, ``root_cause_step``);
- ``payback``: when a compaction pays for itself (break-even steps);
- ``audit``: each summary checked against what the workspace and trajectory held
  (``SummaryWorkspace`` records the workspace at each summary);
- ``continuation``: how an episode goes on after each compaction (re-reads, the next step
  followed);
- ``stats``: means over tasks with bootstrap intervals, paired differences.
"""
