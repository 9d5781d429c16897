"""Split profiles: the size, noise and visibility knobs of each built-in split."""

from __future__ import annotations

from dataclasses import dataclass

SUBSETS = ("train", "eval")


@dataclass(frozen=True)
class SplitProfile:
    """How the tasks of one split are built.

    ``train_tasks`` and ``eval_tasks`` are upper bounds (the catalogue may hold fewer
    eligible bugs). ``legacy_modules`` counts deprecated module copies (the bug's module is
    one of them only in the few tasks planned with a copy of it, ``BUG_COPY_SHARE``),
    ``contrib_modules`` the near-identical helper modules.
    ``allow_direct``: a failing test may call the buggy function by name (in every split at
    least the test the report is written from reaches it through another function).
    ``two_bug_share``: the fraction of tasks with two bugs (in different functions, with
    separate failing tests; the report describes both symptoms).
    """

    name: str
    train_tasks: int
    eval_tasks: int
    legacy_modules: int
    contrib_modules: int
    data_rows: int
    log_lines: int
    verbose_tests: bool
    hide_fail_to_pass: bool
    max_fail_to_pass: int
    allow_direct: bool
    seed_base: int
    two_bug_share: float = 0.0


PROFILES: dict[str, SplitProfile] = {
    profile.name: profile
    for profile in (
        SplitProfile(
            "easy",
            60,
            15,
            legacy_modules=1,
            contrib_modules=2,
            data_rows=400,
            log_lines=0,
            verbose_tests=False,
            hide_fail_to_pass=False,
            max_fail_to_pass=8,
            allow_direct=True,
            seed_base=0,
        ),
        SplitProfile(
            "medium",
            60,
            15,
            legacy_modules=3,
            contrib_modules=8,
            data_rows=1500,
            log_lines=0,
            verbose_tests=False,
            hide_fail_to_pass=False,
            max_fail_to_pass=5,
            allow_direct=False,
            seed_base=10_000,
            two_bug_share=0.25,
        ),
        SplitProfile(
            "hard",
            40,
            10,
            legacy_modules=3,
            contrib_modules=8,
            data_rows=1500,
            log_lines=0,
            verbose_tests=False,
            hide_fail_to_pass=True,
            max_fail_to_pass=5,
            allow_direct=False,
            seed_base=20_000,
        ),
        SplitProfile(
            "context-stress",
            40,
            10,
            legacy_modules=8,
            contrib_modules=28,
            data_rows=6000,
            log_lines=2500,
            verbose_tests=True,
            hide_fail_to_pass=False,
            max_fail_to_pass=6,
            allow_direct=False,
            seed_base=30_000,
            two_bug_share=0.25,
        ),
    )
}
# Evaluation seeds are the training seeds plus this offset: the two ranges never overlap.
EVAL_SEED_OFFSET = 100_000
# At most this share of each split's subset keeps a deprecated copy of the buggy module, made
# before the bug: diffing it against the module shows the fix, a hint real repositories rarely
# give. The other tasks keep deprecated copies of other modules only.
BUG_COPY_SHARE = 0.25
