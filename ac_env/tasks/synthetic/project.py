"""Render the files of one task's repository: the buggy domain project plus seeded
distractors and noise, and (for hidden-test splits) the tests the grader adds back."""

from __future__ import annotations

import ast
import difflib
import random
from dataclasses import dataclass

from ac_env.tasks.synthetic import distractors, noise
from ac_env.tasks.synthetic.catalog import CatalogEntry
from ac_env.tasks.synthetic.domain import Domain
from ac_env.tasks.synthetic.mutations import apply_mutations
from ac_env.tasks.synthetic.profiles import SplitProfile

GITIGNORE = "__pycache__/\n*.pyc\n.pytest_cache/\n*.egg-info/\n"


@dataclass(frozen=True)
class RenderedProject:
    """``files``: the snapshot (buggy, hidden tests removed). ``gold_patch`` fixes the bug;
    ``test_patch`` adds the hidden tests back (empty when none are hidden)."""

    files: dict[str, str]
    gold_patch: str
    test_patch: str


def unified_diff(path: str, old: str, new: str) -> str:
    """A git-style diff of one file that ``git apply`` accepts at the repo root."""
    body = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(body)


def keywords_of(test_id: str) -> list[str]:
    """Words of a test's name, as a user would use them to describe the symptom."""
    words = test_id.rsplit("::", 1)[1].removeprefix("test_").split("_")
    return [word for word in words if len(word) > 2][:3]


def remove_tests(source: str, names: set[str]) -> str:
    """``source`` without the top-level test functions ``names`` (and the blank lines that
    separated them from the previous definition)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
            while start > 0 and not lines[start - 1].strip():
                start -= 1
            drop.update(range(start, node.end_lineno or start))
    return "".join(line for index, line in enumerate(lines) if index not in drop)


def pyproject(domain: Domain, verbose: bool) -> str:
    logging_lines = 'log_level = "DEBUG"\n' if verbose else ""
    return (
        "[build-system]\n"
        'requires = ["setuptools>=68"]\n'
        'build-backend = "setuptools.build_meta"\n\n'
        "[project]\n"
        f'name = "{domain.package}"\n'
        f'version = "{domain.version}"\n'
        f'description = "{domain.title.split(" - ", 1)[1]}"\n'
        'readme = "README.md"\n'
        'requires-python = ">=3.11"\n'
        "dependencies = []\n\n"
        "[tool.setuptools.packages.find]\n"
        f'include = ["{domain.package}*"]\n\n'
        "[tool.pytest.ini_options]\n"
        'testpaths = ["tests"]\n'
        'pythonpath = ["."]\n'
        f"{logging_lines}"
    )


def readme(domain: Domain, files: dict[str, str], extra_files: list[str]) -> str:
    """README with the domain's description and a module map built from docstrings."""
    rows = []
    for path in sorted(p for p in files if p.endswith(".py") and p.startswith(domain.package)):
        docstring = ast.get_docstring(ast.parse(files[path])) or ""
        first = docstring.splitlines()[0] if docstring else ""
        rows.append(f"- `{path}`: {first}")
    data = "\n".join(f"- `{path}`" for path in extra_files)
    return (
        f"# {domain.title}\n\n{domain.description}\n\n"
        f"## Usage\n\n```python\n{domain.usage}\n```\n\n"
        "## Development\n\nRun the tests with `python3 -m pytest`. Everything is standard "
        "library only.\n\n"
        f"## Layout\n\n" + "\n".join(rows) + "\n\n"
        f"## Data and logs\n\n{data}\n"
    )


def render_project(
    domain: Domain,
    entry: CatalogEntry,
    profile: SplitProfile,
    rng: random.Random,
    report_test: str,
    bug_copy: bool,
) -> RenderedProject:
    """All files of the task repository for one seed. ``bug_copy``: the deprecated copies
    include the modules that hold the bugs (as many copies either way)."""
    files = dict(domain.files)
    gold: list[str] = []
    for path in sorted({m.file for m in entry.mutations}):
        fixed = files[path]
        files[path] = apply_mutations(fixed, [m for m in entry.mutations if m.file == path])
        gold.append(unified_diff(path, files[path], fixed))
    keywords = keywords_of(report_test)
    package = domain.package
    sources = {p: files[p] for p in domain.source_modules() if not p.endswith("__init__.py")}

    bug_files = sorted({m.file for m in entry.mutations})
    others = sorted(set(sources) - set(bug_files))
    copies = min(len(sources), max(profile.legacy_modules, len(bug_files)))
    copied = bug_files if bug_copy else []
    legacy_sources = copied + rng.sample(others, min(len(others), copies - len(copied)))
    files[f"{package}/legacy/__init__.py"] = distractors.legacy_package_init(package)
    for path in legacy_sources:
        # Made from the module as it was before the bug, with slips of its own.
        slip_rng = random.Random(f"legacy:{entry.id}:{path}")
        before = distractors.old_slips(slip_rng, path, domain.files[path], entry.mutations)
        target, text = distractors.legacy_module(path, before, package, domain.version)
        files[target] = text
    files[f"{package}/contrib/__init__.py"] = distractors.contrib_package_init(package)
    taken: set[str] = set()
    for _ in range(profile.contrib_modules):
        target, text = distractors.contrib_module(rng, package, sources, taken, keywords)
        files[target] = text

    extra: list[str] = []
    data_path, data_text = noise.data_file(domain.name, rng, profile.data_rows)
    files[data_path] = data_text
    extra.append(data_path)
    if profile.log_lines:
        modules = sorted(distractors.module_name(p) for p in sources)
        log_path, log_text = noise.log_file(rng, modules, keywords, profile.log_lines)
        files[log_path] = log_text
        extra.append(log_path)
    if profile.verbose_tests:
        files["tests/conftest.py"] += noise.verbose_fixture(rng, package, data_path)

    test_patch = ""
    if profile.hide_fail_to_pass:
        hidden: dict[str, set[str]] = {}
        for test in entry.fail_to_pass:
            path, name = test.split("::", 1)
            hidden.setdefault(path, set()).add(name)
        patches = []
        for path in sorted(hidden):
            full = files[path]
            files[path] = remove_tests(full, hidden[path])
            patches.append(unified_diff(path, files[path], full))
        test_patch = "".join(patches)

    files["pyproject.toml"] = pyproject(domain, profile.verbose_tests)
    files[".gitignore"] = GITIGNORE
    files["README.md"] = readme(domain, files, extra)
    return RenderedProject(
        files=dict(sorted(files.items())), gold_patch="".join(gold), test_patch=test_patch
    )
