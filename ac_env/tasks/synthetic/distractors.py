"""Distractor modules: code that looks relevant to a bug but is not where it lives.

- ``<pkg>/legacy/<module>_v1.py``: deprecated copies of domain modules. In a minority of
  tasks (``profiles.BUG_COPY_SHARE``) they include the module that holds the bug, so the buggy
  function exists twice under the same name. A deprecated copy predates the bug (it has the
  code as it was before the regression) and has slips of its own that the maintained module
  fixed since (``old_slips``), so comparing the two shows the regression among other
  differences, never alone.
- ``<pkg>/contrib/<name>.py``: helpers copied from domain functions under near-identical
  names (``tier_rate_fast``, ``_tier_rate``, ...), some with comments that mention the
  symptom's keywords.

None of these modules is imported by the package or its tests.
"""

from __future__ import annotations

import ast
import random

from ac_env.tasks.synthetic.mutations import Mutation, apply_mutations, find_mutations

RENAMES = ("{}_fast", "_{}", "{}_compat", "{}2", "safe_{}", "{}_unchecked", "legacy_{}")
PURPOSES = (
    "nightly export",
    "command line tools",
    "data migration",
    "admin dashboard",
    "batch import",
    "reporting jobs",
    "support scripts",
)
NAME_PATTERNS = (
    "{}_helpers",
    "{}_utils",
    "fast_{}",
    "{}_extras",
    "experimental_{}",
    "{}_tools",
    "{}_shims",
)
NOTES = (
    "# NOTE: {words} looked wrong here once (issue #{number}); this copy was checked then.",
    "# {words}: keep in sync with the main implementation (see #{number}).",
    "# FIXME(#{number}): callers reported {words} problems; they came from their input.",
    "# The {words} handling below mirrors the package; do not change one without the other.",
)


def module_name(path: str) -> str:
    """``ledgerly/core/money.py`` -> ``ledgerly.core.money``."""
    return path[: -len(".py")].replace("/", ".").removesuffix(".__init__")


def legacy_module(path: str, source: str, package: str, version: str) -> tuple[str, str]:
    """(path, text) of a deprecated full copy of module ``path``."""
    dotted = module_name(path)
    stem = path.rsplit("/", 1)[1][: -len(".py")]
    tree = ast.parse(source)
    body_start = 0
    if tree.body and isinstance(tree.body[0], ast.Expr):
        body_start = tree.body[0].end_lineno or 0
    rest = "".join(source.splitlines(keepends=True)[body_start:]).lstrip("\n")
    major = int(version.split(".")[0])
    header = (
        f'"""Deprecated: the {max(major - 1, 0)}.x implementation of ``{dotted}``.\n\n'
        f"Kept for callers pinned to {package} {max(major - 1, 0)}.x. New code should import "
        f"from ``{dotted}``;\nthis copy is not maintained and will be removed in "
        f'{package} {major + 1}.0.\n"""\n\n'
    )
    return f"{package}/legacy/{stem}_v1.py", header + rest


LEGACY_SLIPS = 2
SLIP_MARGIN = 2  # lines kept clear around the bug, so each difference stays its own hunk


def old_slips(rng: random.Random, path: str, source: str, bugs: list[Mutation]) -> str:
    """``source`` with up to ``LEGACY_SLIPS`` slips from the mutation families, none within
    ``SLIP_MARGIN`` lines of a bug in this file nor of another slip."""
    taken = [(m.line, m.end_line) for m in bugs if m.file == path]
    chosen: list[Mutation] = []
    candidates = find_mutations(path, source)
    rng.shuffle(candidates)
    for slip in candidates:
        if len(chosen) == LEGACY_SLIPS:
            break
        low, high = slip.line - SLIP_MARGIN, slip.end_line + SLIP_MARGIN
        if all(high < start or low > end for start, end in taken):
            chosen.append(slip)
            taken.append((slip.line, slip.end_line))
    return apply_mutations(source, chosen)


def legacy_package_init(package: str) -> str:
    return (
        f'"""Deprecated modules kept for backwards compatibility.\n\n'
        f"Nothing in {package} imports them; they exist so that old scripts keep running.\n"
        '"""\n'
    )


def contrib_package_init(package: str) -> str:
    return f'"""Contributed helpers built on {package}. Not part of the public API."""\n'


def _top_level_functions(path: str, source: str) -> list[tuple[ast.FunctionDef, str]]:
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("__"):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            found.append((node, "".join(lines[start - 1 : node.end_lineno])))
    return found


def _imports_and_names(source: str) -> tuple[list[str], set[str]]:
    """The module's import lines and the names it defines at top level."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    imports, names = [], set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                imports.append("".join(lines[node.lineno - 1 : node.end_lineno]).rstrip())
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return imports, names


def contrib_module(
    rng: random.Random,
    package: str,
    sources: dict[str, str],
    taken: set[str],
    keywords: list[str],
) -> tuple[str, str]:
    """(path, text) of one helper module copying a few functions under near-identical names.

    ``sources`` maps domain module paths to their text; ``taken`` collects used paths.
    """
    path = rng.choice(sorted(sources))
    stem = path.rsplit("/", 1)[1][: -len(".py")]
    stem = stem if stem != "__init__" else package
    name = rng.choice(NAME_PATTERNS).format(stem)
    target = f"{package}/contrib/{name}.py"
    suffix = 2
    while target in taken:
        target = f"{package}/contrib/{name}_{suffix}.py"
        suffix += 1
    taken.add(target)
    functions = _top_level_functions(path, sources[path])
    imports, defined = _imports_and_names(sources[path])
    chosen = rng.sample(functions, min(len(functions), rng.randint(2, 5))) if functions else []
    chosen.sort(key=lambda item: item[0].lineno)
    needed: set[str] = set()
    blocks = []
    for node, text in chosen:
        new_name = rng.choice(RENAMES).format(node.name)
        text = text.replace(f"def {node.name}(", f"def {new_name}(", 1)
        if keywords and rng.random() < 0.4:
            note = rng.choice(NOTES).format(words=" ".join(keywords), number=rng.randint(40, 400))
            text = f"{note}\n{text}"
        blocks.append(text)
        needed |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} & defined
    dotted = module_name(path)
    if needed:
        imports.append(f"from {dotted} import {', '.join(sorted(needed))}")
    docstring = (
        f'"""Helpers around ``{dotted}`` used by the {rng.choice(PURPOSES)}.\n\n'
        "These are copies tuned for one caller each; prefer the package functions.\n"
        '"""\n'
    )
    header = "\n".join([docstring, "from __future__ import annotations\n", *imports])
    return target, header + "\n\n\n" + "\n\n".join(blocks)
