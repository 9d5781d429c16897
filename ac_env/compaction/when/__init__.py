"""When to compact: every timing rule, behind one interface (``moment``: ``Moment``,
``TimingRule``).

Each rule is one module of this package that names its class ``RULE``; ``timing_rule`` finds
it by name, so adding a rule is one file (and its test). A spec is the rule's name, with its
one integer argument after a colon where it takes one: ``never``, ``every:5``,
``threshold:16384``, ``after_passing_tests``.

Who uses them: the env's forced fallback is ``TokenThreshold`` (``forced_compaction_threshold``);
``ReferenceAgent(compact_when=...)`` takes any rule or spec (and its own phase rules, which read
its working state: ``ac_env.agents.reference``); ``AutoCompact-Timing-v0``'s fixed baselines
are rules (``ac_env.timing.rules.decide_by``); a trained timing-policy file acts as a rule
through ``ac_env.timing.timed.PolicyTiming``; ``ac-bench`` reports each rule's
``description``.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from ac_env.compaction.when.after_passing_tests import AfterPassingTests
from ac_env.compaction.when.every import Every
from ac_env.compaction.when.moment import Moment, TimingRule
from ac_env.compaction.when.never import Never
from ac_env.compaction.when.threshold import TokenThreshold


def _rules() -> dict[str, Any]:
    """Each module's ``RULE``, by the module's name."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        rule = getattr(importlib.import_module(f"{__name__}.{info.name}"), "RULE", None)
        if rule is not None:
            found[info.name] = rule
    return found


RULES: dict[str, Any] = _rules()
"""Rule name -> its class (the module's ``RULE``)."""


def timing_rule(spec: str) -> TimingRule:
    """The rule a spec names (``every:5``); a ValueError names the spec and the known rules."""
    name, _, argument = spec.partition(":")
    if name not in RULES:
        raise ValueError(f"timing rule {spec!r}: unknown rule {name!r}; known: {', '.join(RULES)}")
    try:
        rule = RULES[name](int(argument)) if argument else RULES[name]()
    except (TypeError, ValueError) as error:
        raise ValueError(f"timing rule {spec!r}: {error}") from error
    return rule


__all__ = [
    "RULES",
    "AfterPassingTests",
    "Every",
    "Moment",
    "Never",
    "TimingRule",
    "TokenThreshold",
    "timing_rule",
]
