"""When to compact: every timing rule, behind one interface (``moment``: ``Moment``,
``TimingRule``).

One registry holds every rule by name (``rules()``): each module of this package that names
its class ``RULE`` (adding a rule is one file and its test), and the rules other packages
register in the ``autocompact.timing_rules`` entry-point group. The reference agent's phase
rules are registered there (``ac_env.agents.reference``: they read its working state, so they
live with it; ``pyproject.toml`` names them), as a user's own package would register its rule.
A spec is the rule's name, with its one integer argument after a colon where it takes one:
``never``, ``every:5``, ``threshold:16384``, ``after_passing_tests``, ``rubric``.

Who uses them: the env's forced fallback is ``TokenThreshold`` (``forced_compaction_threshold``);
``ReferenceAgent(compact_when=...)`` takes any rule or spec; each strategy names the rule a
model-free worker follows under it (``ac_env.strategies``), and ``ac-bench``'s report prints
that rule's ``description``; ``AutoCompact-Timing-v0``'s fixed baselines are rules
(``ac_env.timing.rules.decide_by``); a trained timing-policy file acts as a rule through
``ac_env.timing.timed.PolicyTiming``.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points
from typing import Any

from ac_env.compaction.when.after_passing_tests import AfterPassingTests
from ac_env.compaction.when.every import Every
from ac_env.compaction.when.moment import Moment, TimingRule
from ac_env.compaction.when.never import Never
from ac_env.compaction.when.threshold import TokenThreshold

ENTRY_POINTS = "autocompact.timing_rules"
"""The entry-point group other packages register rules in: ``name = "module:Class"``."""


def _package_rules() -> dict[str, Any]:
    """Each module's ``RULE``, by the module's name."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        rule = getattr(importlib.import_module(f"{__name__}.{info.name}"), "RULE", None)
        if rule is not None:
            found[info.name] = rule
    return found


RULES: dict[str, Any] = _package_rules()
"""This package's rules: name -> class (the module's ``RULE``)."""


def rules() -> dict[str, Any]:
    """Every rule by name: this package's, then those registered under ``ENTRY_POINTS``
    (loaded here, when a spec is first resolved). A registered name may not shadow a
    package rule."""
    registered = {}
    for point in entry_points(group=ENTRY_POINTS):
        if point.name in RULES:
            raise ValueError(
                f"timing rule {point.name!r} registered by {point.value!r} shadows "
                f"ac_env.compaction.when.{point.name}"
            )
        registered[point.name] = point.load()
    return {**RULES, **registered}


def timing_rule(spec: str) -> TimingRule:
    """The rule a spec names (``every:5``); a ValueError names the spec and the known rules."""
    name, _, argument = spec.partition(":")
    known = rules()
    if name not in known:
        raise ValueError(f"timing rule {spec!r}: unknown rule {name!r}; known: {', '.join(known)}")
    try:
        rule: TimingRule = known[name](int(argument)) if argument else known[name]()
    except (TypeError, ValueError) as error:
        raise ValueError(f"timing rule {spec!r}: {error}") from error
    return rule


__all__ = [
    "ENTRY_POINTS",
    "RULES",
    "AfterPassingTests",
    "Every",
    "Moment",
    "Never",
    "TimingRule",
    "TokenThreshold",
    "rules",
    "timing_rule",
]
