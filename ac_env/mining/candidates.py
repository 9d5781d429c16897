"""Candidate bugs: the built-in suite's mutation operators, applied to the public functions and
methods of a library's modules, in an order that spreads tasks over many functions."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path

from ac_env.tasks.synthetic.mutations import Mutation, find_mutations


def is_public(qualname: str) -> bool:
    """``f``, ``Cls.method`` and ``Cls.__init__`` are public; ``_f`` and ``_Cls.f`` are not."""
    return not any(
        part.startswith("_") and not (part.startswith("__") and part.endswith("__"))
        for part in qualname.split(".")
    )


def public_mutations(repo: Path, modules: list[str]) -> list[Mutation]:
    """Every candidate mutation in the public functions of ``modules`` (repo-relative)."""
    found: list[Mutation] = []
    for path in modules:
        try:
            source = (repo / path).read_text(encoding="utf-8")
            mutations = find_mutations(path, source)
        except (UnicodeDecodeError, SyntaxError):
            continue
        found.extend(m for m in mutations if is_public(m.function))
    return found


def schedule(mutations: list[Mutation], seed: int = 0) -> list[Mutation]:
    """Round robin over functions (each function's mutations in a seeded order), so that the
    first N candidates touch as many functions as they can."""
    by_function: dict[tuple[str, str], list[Mutation]] = defaultdict(list)
    for mutation in mutations:
        by_function[(mutation.file, mutation.function)].append(mutation)

    def rank(text: str) -> bytes:
        return hashlib.sha256(f"{seed}:{text}".encode()).digest()

    queues = [
        sorted(items, key=lambda m: rank(m.key()))
        for _, items in sorted(by_function.items(), key=lambda kv: rank("/".join(kv[0])))
    ]
    ordered: list[Mutation] = []
    for index in range(max((len(q) for q in queues), default=0)):
        ordered.extend(queue[index] for queue in queues if index < len(queue))
    return ordered
