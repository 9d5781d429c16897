"""Tiny source distributions for the task-builder tests, packed with tar like PyPI's: a small
library with a ``tests/`` folder, and broken variants (no tests, a missing test dependency,
a suite that fails at baseline)."""

from __future__ import annotations

import subprocess
from pathlib import Path

STATS = '''"""Small numeric helpers."""


def sign(x):
    """1, -1 or 0."""
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0


def mean(values):
    """The arithmetic mean of a non-empty list."""
    if not values:
        raise ValueError("mean of nothing")
    return sum(values) / len(values)


def _bump(x):
    return x + 1
'''
PRIVATE = """def hidden(x):
    return x * 2
"""
TESTS = """import time

import pytest

from minilib.stats import mean, sign


def test_sign_positive():
    assert sign(5) == 1


def test_sign_negative():
    assert sign(-5) == -1


def test_sign_zero():
    assert sign(0) == 0


def test_mean():
    assert mean([1, 2, 3]) == 2


def test_mean_empty():
    with pytest.raises(ValueError):
        mean([])


def test_slow():
    time.sleep(1.5)
    assert sign(2) == 1
"""
PYPROJECT = """[project]
name = "minilib"
version = "0.1"

[tool.pytest.ini_options]
addopts = "--doctest-modules --no-such-plugin-option"
"""


def library_files(tests: str = TESTS, with_tests: bool = True) -> dict[str, str]:
    files = {
        "PKG-INFO": "Metadata-Version: 2.1\nName: minilib\nVersion: 0.1\n",
        "pyproject.toml": PYPROJECT,
        "minilib/__init__.py": '"""minilib."""\n',
        "minilib/stats.py": STATS,
        "minilib/_private.py": PRIVATE,
    }
    if with_tests:
        files["tests/__init__.py"] = ""
        files["tests/test_stats.py"] = tests
    return files


def make_sdist(root: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """``root/<name>-<version>.tar.gz`` holding ``files`` under ``<name>-<version>/``."""
    top = f"{name}-{version}"
    for path, text in files.items():
        target = root / "src" / top / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    archive = root / f"{top}.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(root / "src"), top], check=True)
    return archive


def good_sdist(root: Path) -> Path:
    return make_sdist(root, "minilib", "0.1", library_files())


def no_tests_sdist(root: Path) -> Path:
    return make_sdist(root, "notests", "1.0", library_files(with_tests=False))


def missing_dependency_sdist(root: Path) -> Path:
    tests = "import hypothesis_is_not_here\n\n\ndef test_x():\n    assert True\n"
    return make_sdist(root, "needsdeps", "1.0", library_files(tests=tests))


def failing_sdist(root: Path) -> Path:
    tests = "def test_a():\n    assert 1 == 2\n\n\ndef test_b():\n    assert 2 == 3\n"
    return make_sdist(root, "failing", "1.0", library_files(tests=tests))
