"""The package's layers, checked on the imports themselves (read with ``ast``, every import
statement counts: module level, inside functions, under ``TYPE_CHECKING``).

``LAYERS`` lists the layers lowest first. A module may import modules of its own layer and of
the layers listed before it (lower), never of a layer listed after it (higher).
``docs/architecture.md`` describes the layers.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ac_env", "ac_train")

# The rules, in one table. Lowest layer first; an entry names a module or a package (the
# package with everything under it); the longest matching entry decides a module's layer.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "core",  # data and mechanics of an episode: no I/O, no tasks, no sandboxes
        (
            "ac_env.actions",
            "ac_env.compaction",
            "ac_env.context",
            "ac_env.cost",
            "ac_env.host_git",
            "ac_env.lazy_import",
            "ac_env.paths",
            "ac_env.records",
            "ac_env.policy",
            "ac_env.spaces",
            "ac_env.pytest_log",
            "ac_env.tokens",
            "ac_env.trajectory",
        ),
    ),
    ("tasks", ("ac_env.tasks",)),  # know nothing of sandboxes or episodes
    ("sandbox", ("ac_env.sandbox",)),  # materializes a task, runs commands
    (
        "env",  # the episode: AutoCompactSWEEnv, its config, grading, snapshots
        (
            "ac_env.__init__",
            "ac_env.config",
            "ac_env.config_flags",
            "ac_env.env",
            "ac_env.grading",
            "ac_env.prompts",
            "ac_env.snapshot",
            "ac_env.strategies",
        ),
    ),
    ("mining", ("ac_env.mining",)),  # builds tasks with sandbox and grader
    ("agents", ("ac_env.agents",)),
    ("timing", ("ac_env.timing",)),  # envs built on AutoCompact-SWE-v0
    ("analysis", ("ac_env.analysis",)),  # figures read from finished trajectories
    ("runs", ("ac_env.runs",)),  # what every run of many episodes shares
    ("integrations", ("ac_env.integrations",)),  # other frameworks' adapters, on the env
    ("bench", ("ac_env.bench",)),  # the ac-bench application
    ("cli", ("ac_env.cli",)),  # `ac-env`: tasks (mining) and serve (integrations)
    # ac_train: the data every trainer shares, then the wings, then what runs them
    ("train-data", ("ac_train.__init__", "ac_train.segments", "ac_train.advantages")),
    ("train-models", ("ac_train.models",)),  # loading, generating, serving
    ("train-judge", ("ac_train.judge",)),  # knows no model: a judge is given its policy
    ("train-stages", ("ac_train.sft", "ac_train.collect", "ac_train.shadow_eval", "ac_train.grpo")),
    ("train-integrations", ("ac_train.integrations",)),  # other trainers' adapters
    ("train-cli", ("ac_train.cli",)),
)
# Applications: no module outside one imports it, whatever the layers allow (``ac_train`` sits
# above ``ac_env.bench`` only because ``ac_env`` never imports ``ac_train``).
APPLICATIONS = ("ac_env.bench",)
# Third-party packages a package never imports (``ac_env`` runs without the train extra).
FORBIDDEN_EXTERNAL: dict[str, tuple[str, ...]] = {"ac_env": ("torch", "trl", "accelerate")}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    where: str  # path:line of the import


def module_names(root: Path) -> dict[str, Path]:
    """Module name -> file for every module of ``PACKAGES`` under ``root``; a package's
    ``__init__.py`` is ``<package>.__init__``."""
    names = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            names[".".join(path.relative_to(root).with_suffix("").parts)] = path
    return names


def _resolve(name: str, modules: dict[str, Path]) -> str:
    """The module an imported dotted name loads: itself, or its package's ``__init__``."""
    return name if name in modules else f"{name}.__init__"


def import_edges(root: Path) -> list[Edge]:
    modules = module_names(root)
    edges = []
    for source, path in modules.items():
        package = source.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                edges += [Edge(source, _resolve(a.name, modules), where) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                else:
                    base = node.module or ""
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"  # a module, a package or a name
                    if submodule in modules or f"{submodule}.__init__" in modules:
                        target = _resolve(submodule, modules)
                    else:
                        target = _resolve(base, modules)
                    edges.append(Edge(source, target, where))
    return edges


def _known(module: str) -> bool:
    return layer_of(module) is not None


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the entry, layer index)
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            if module == entry or module.startswith(entry + "."):
                best = max(best or (0, 0), (len(entry), index))
    return None if best is None else best[1]


def application_of(module: str) -> str | None:
    return next((a for a in APPLICATIONS if module == a or module.startswith(a + ".")), None)


def violations(root: Path) -> list[str]:
    """Every module without a layer, every import of a higher layer or of a forbidden
    third-party package, under ``root``."""
    found = [f"{m}: in no layer; add it to LAYERS" for m in module_names(root) if not _known(m)]
    for edge in import_edges(root):
        source_layer = layer_of(edge.source)
        top = edge.target.split(".")[0]
        if source_layer is None:
            continue
        if top in PACKAGES:
            target_layer = layer_of(edge.target)
            app = application_of(edge.target)
            if app is not None and application_of(edge.source) != app:
                found.append(
                    f"{edge.where}: {edge.source} imports {edge.target}: {app} is an "
                    "application, not a library"
                )
            elif target_layer is None:
                found.append(f"{edge.where}: {edge.target} is in no layer; add it to LAYERS")
            elif target_layer > source_layer:
                found.append(
                    f"{edge.where}: {edge.source} ({LAYERS[source_layer][0]}) imports "
                    f"{edge.target} ({LAYERS[target_layer][0]})"
                )
        elif top in FORBIDDEN_EXTERNAL.get(edge.source.split(".")[0], ()):
            found.append(f"{edge.where}: {edge.source} imports {edge.target.split('.')[0]}")
    return sorted(set(found))


def test_the_package_respects_its_layers():
    assert violations(ROOT) == []


def registry_violations(registries: dict[str, list[str]]) -> list[str]:
    """Each ``"module:function"`` a registry module names (registry -> its targets) whose
    module sits in a higher layer: the registry imports it at run time, which no import
    statement shows."""
    modules = module_names(ROOT)
    found = []
    for registry, targets in registries.items():
        for target in targets:
            module = _resolve(target.partition(":")[0], modules)
            source_layer, target_layer = layer_of(registry), layer_of(module)
            if source_layer is None or target_layer is None or target_layer > source_layer:
                found.append(f"{registry} names {target}, above it or in no layer")
    return found


def test_registry_entries_respect_the_layers():
    from ac_env.sandbox import SANDBOXES
    from ac_env.tasks.sources import TASK_SOURCES

    registries = {
        "ac_env.tasks.sources": [source.load for source in TASK_SOURCES.values()],
        "ac_env.sandbox.__init__": [
            target
            for backend in SANDBOXES.values()
            for target in (backend.factory, backend.check_tasks)
            if target is not None
        ],
    }
    assert registry_violations(registries) == []
    # a task source that runs episodes would reach up to the env
    assert registry_violations({"ac_env.tasks.sources": ["ac_env.env:load"]}) == [
        "ac_env.tasks.sources names ac_env.env:load, above it or in no layer"
    ]


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


LEGAL_TREE = {
    "ac_env/__init__.py": "from ac_env.policy import PolicyOutput\n",
    "ac_env/policy.py": "",
    "ac_env/context.py": "from . import tokens\nfrom ac_env.tokens import count\n",
    "ac_env/tokens.py": "def count():\n    import transformers\n",
    "ac_env/env.py": "from ac_env.tasks import Task\nfrom ac_env.sandbox.base import Sandbox\n",
    "ac_env/tasks/__init__.py": "from .model import Task\n",
    "ac_env/tasks/model.py": "",
    "ac_env/sandbox/__init__.py": "",
    "ac_env/sandbox/base.py": "from ..tasks.model import Task\n",
    "ac_env/agents/__init__.py": "from ac_env.agents.reference import ReferenceAgent\n",
    "ac_env/agents/reference.py": "from ac_env import env\n",
    "ac_env/bench/__init__.py": "",
    "ac_env/runs/workers.py": "from ac_env.agents import ReferenceAgent\n",
    "ac_train/__init__.py": "",
    "ac_env/runs/__init__.py": "",
    "ac_env/bench/cli.py": "from ac_env.bench import runner\nfrom ac_env.runs import workers\n",
    "ac_env/bench/runner.py": "",
    "ac_train/models.py": "import torch\nfrom ac_env.runs import workers\n",
}


def test_a_legal_tree_passes(tmp_path):
    _write(tmp_path, LEGAL_TREE)
    assert violations(tmp_path) == []


def test_every_forbidden_edge_is_named(tmp_path):
    _write(
        tmp_path,
        {
            **LEGAL_TREE,
            # the env core reaching up to the agents, lazily inside a function
            "ac_env/context.py": "def f():\n    from ac_env.agents import reference\n",
            # a task that knows about sandboxes, through a relative import
            "ac_env/tasks/model.py": "from ..sandbox import base\n",
            # ac_env depending on the training package and on torch
            "ac_env/runs/workers.py": "import torch.nn\nfrom ac_train.models import load\n",
            "ac_env/extra.py": "",
            # the trainer, or a shared piece, leaning on the benchmark application
            "ac_train/models.py": "from ac_env.bench.runner import run_episode\n",
            "ac_env/runs/__init__.py": "def f():\n    from ac_env import bench\n",
            # a wing reaching sideways into the trainer that uses it
            "ac_train/judge/oracle.py": "from ac_train.grpo.trainer import GRPOTrainer\n",
            "ac_train/grpo/trainer.py": "",
        },
    )
    assert violations(tmp_path) == [
        "ac_env.extra: in no layer; add it to LAYERS",
        "ac_env/context.py:2: ac_env.context (core) imports ac_env.agents.reference (agents)",
        "ac_env/runs/__init__.py:2: ac_env.runs.__init__ imports ac_env.bench.__init__: "
        "ac_env.bench is an application, not a library",
        "ac_env/runs/workers.py:1: ac_env.runs.workers imports torch",
        "ac_env/runs/workers.py:2: ac_env.runs.workers (runs) imports ac_train.models "
        "(train-models)",
        "ac_env/tasks/model.py:1: ac_env.tasks.model (tasks) imports ac_env.sandbox.base (sandbox)",
        "ac_train/judge/oracle.py:1: ac_train.judge.oracle (train-judge) imports "
        "ac_train.grpo.trainer (train-stages)",
        "ac_train/models.py:1: ac_train.models imports ac_env.bench.runner: "
        "ac_env.bench is an application, not a library",
    ]


BLOCK_AND_IMPORT_ALL = """
import importlib, importlib.abc, pkgutil, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "ac_train"):
            raise ImportError(f"blocked: {name}")

sys.meta_path.insert(0, Block())
import ac_env
for module in pkgutil.walk_packages(ac_env.__path__, "ac_env."):
    importlib.import_module(module.name)
print("imported", len(sys.modules))
"""


def test_ac_env_imports_without_torch_and_ac_train():
    result = subprocess.run(
        [sys.executable, "-c", BLOCK_AND_IMPORT_ALL],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr


# A user's clone holds only the repository: no file may point outside it.
OUTSIDE = re.compile("|".join([r"\.\./" + "shared", r"(?<![\w.])/" + r"work/", "DESIGN" + r"\.md"]))
REPO_FILES = ("ac_env", "ac_train", "tests", "docs", "examples", "benchmarks", "scripts")


def test_no_file_names_a_path_outside_the_repo():
    paths = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for folder in REPO_FILES:
        paths += [
            p for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts
        ]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in paths
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == []
