"""The built-in task suite: realistic small Python projects with injected, validated bugs.

How a task is made:

1. Three hand-written domain projects (``domains/``: ``ledgerly`` an inventory ledger,
   ``datewise`` date parsing and calendars, ``stencil`` a templating engine) are real,
   coherent code with real pytest suites.
2. ``mutations`` finds candidate bugs by AST (the operator family is documented there);
   ``build_catalog`` runs each domain's tests against every candidate and ships the
   validated ones, with their FAIL_TO_PASS tests and failure messages, in ``catalog.json``.
3. ``suite`` assigns catalogued bugs to tasks per split (``profiles``), writes each task's
   problem statement from a failing test (``statements``), and renders its repository for
   the task's seed (``project``: buggy code, deprecated copies and near-identical helpers
   from ``distractors``, data files and logs from ``noise``) as a one-commit git snapshot
   (``ac_env.tasks.git_repo``), cached on disk.
4. ``validation.validate_task`` re-runs the real check for any task.

Splits: ``easy``, ``medium``, ``hard`` (FAIL_TO_PASS tests only in ``test_patch``) and
``context-stress`` (large repo, verbose test output, noisy logs); part of ``medium`` and
``context-stress`` has two bugs per task (``SplitProfile.two_bug_share``). Each split has a
``train`` and a held-out ``eval`` subset: instance ids read
``synthetic__<domain>-<split>-<subset>-<seed>``, evaluation seeds start at
``EVAL_SEED_OFFSET`` and no bug appears in both subsets.

``GroundTruth.functions`` entries are ``<dotted.module>:<qualname>``, for example
``ledgerly.stock.ledger:Ledger.record``.
"""
