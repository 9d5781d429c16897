"""Mutation operators: found by AST, applied as exact text edits."""

import ast

import pytest

from ac_env.tasks.synthetic.domain import all_domains
from ac_env.tasks.synthetic.mutations import (
    OPERATORS,
    StaleMutationError,
    apply_mutations,
    find_mutations,
)

SAMPLE = '''"""Module docstring."""

import logging

logger = logging.getLogger(__name__)
LIMIT = 10


def clamp(values, low=0, strict=False):
    """Docstring with 3 numbers < 4."""
    result = []
    for index in range(1, len(values)):
        if values[index] < low:
            continue
        result.append(values[index] * 2 + LIMIT)
    logger.debug("clamped %d values", 3)
    if strict and not result:
        raise ValueError("nothing left: 5")
    total = max(low, len(result))
    total += 1
    return result[:total], values[0]
'''


def mutations_by_operator():
    found = {}
    for mutation in find_mutations("pkg/mod.py", SAMPLE):
        found.setdefault(mutation.operator, []).append(mutation)
    return found


def test_every_operator_has_a_candidate_in_the_sample():
    assert set(mutations_by_operator()) == set(OPERATORS)


@pytest.mark.parametrize(
    ("operator", "original", "replacement"),
    [
        ("comparison_flip", "<", "<="),
        ("arithmetic_swap", "*", "/"),
        ("arithmetic_swap", "+=", "-="),
        ("swapped_arguments", "low, len(result)", "len(result), low"),
        ("wrong_default", "False", "True"),
        ("wrong_constant", "2", "3"),
        ("inverted_condition", "and", "or"),
        ("off_by_one", "len(values)", "len(values) - 1"),
        ("off_by_one", "total", "total - 1"),
        ("off_by_one", "0", "1"),
    ],
)
def test_operator_replaces_exact_span(operator, original, replacement):
    candidates = [
        m
        for m in mutations_by_operator()[operator]
        if m.original == original and m.replacement == replacement
    ]
    assert candidates, f"no {operator} {original!r} -> {replacement!r}"
    mutated = apply_mutations(SAMPLE, candidates[:1])
    ast.parse(mutated)
    assert len(mutated) == len(SAMPLE) - len(original) + len(replacement)


def test_statement_deletions_remove_whole_lines():
    dropped = mutations_by_operator()["dropped_branch"]
    mutated = apply_mutations(SAMPLE, [m for m in dropped if "continue" in m.original][:1])
    assert "< low" not in mutated
    assert "result.append" in mutated
    removed = [m for m in mutations_by_operator()["removed_call"] if "append" in m.original]
    assert "result.append" not in apply_mutations(SAMPLE, removed)


def test_docstrings_logging_and_raise_messages_are_not_mutated():
    for mutation in find_mutations("pkg/mod.py", SAMPLE):
        assert mutation.line not in (1, 10)  # docstrings
        assert "clamped" not in mutation.original
        assert mutation.original not in ("3", "5") or mutation.line not in (16, 18)


def test_function_names_are_qualified():
    source = "class A:\n    def f(self, x):\n        return x + 1\n"
    (first, *_) = find_mutations("m.py", source)
    assert first.function == "A.f"


def test_stale_mutation_is_refused():
    mutation = mutations_by_operator()["comparison_flip"][0]
    with pytest.raises(StaleMutationError, match="rebuild the catalogue"):
        apply_mutations(SAMPLE.replace("< low", "> low"), [mutation])


def test_several_mutations_in_one_file_apply_together():
    flip = mutations_by_operator()["comparison_flip"][0]
    swap = next(m for m in mutations_by_operator()["arithmetic_swap"] if m.original == "*")
    mutated = apply_mutations(SAMPLE, [swap, flip])
    assert "values[index] <= low" in mutated and "values[index] / 2" in mutated


def test_every_domain_candidate_still_parses():
    for domain in all_domains():
        for path in domain.source_modules():
            for mutation in find_mutations(path, domain.files[path]):
                ast.parse(apply_mutations(domain.files[path], [mutation]))
