"""The README's result tables are made from the files under ``docs/results/``
(``scripts/readme_figures.py``): a rerun updates the results file, the script rewrites the
README, and this test fails while the two disagree."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def figures_module():
    spec = importlib.util.spec_from_file_location(
        "readme_figures", ROOT / "scripts/readme_figures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_tables_match_their_results_files():
    figures = figures_module()
    readme = (ROOT / "README.md").read_text()
    names = [m["name"] for m in figures.BLOCK.finditer(readme)]
    assert names and set(names) <= set(figures.RENDERERS)
    assert figures.rendered(readme) == readme, "run scripts/readme_figures.py --write"


def test_a_changed_result_changes_the_table(tmp_path, monkeypatch):
    figures = figures_module()
    results = tmp_path / "results"
    shutil.copytree(ROOT / "docs" / "results", results)
    run = json.loads((results / "grpo_sitting_run_cpu.json").read_text())
    run["success"]["all"]["after"] = {"mean": 0.75, "low": 0.5, "high": 1.0, "n": 8}
    (results / "grpo_sitting_run_cpu.json").write_text(json.dumps(run))
    monkeypatch.setattr(figures, "RESULTS", results)
    assert "| all (n=8) | 50% [12, 88] | 75% [50, 100] |" in figures.grpo_sitting()


def test_a_block_without_a_renderer_is_an_error():
    figures = figures_module()
    with pytest.raises(KeyError, match="nowhere"):
        figures.rendered("<!-- results:nowhere -->\n<!-- /results -->")
