"""Model workers register through the ``autocompact.workers`` entry-point group, so
``ac_env`` finds ``hf:`` without importing ``ac_train``."""

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from ac_env.policy import PolicyOutput, SamplingConfig
from ac_env.runs.workers import WORKER_ENTRY_POINTS, check_worker, policy_factory
from ac_env.strategies import get_strategy

ROOT = Path(__file__).resolve().parents[1]

FAKE_WORKER = """
from ac_env.policy import PolicyOutput


class Echo:
    def __init__(self, text):
        self.text = text

    def act(self, observation):
        return PolicyOutput(text=self.text)


def make(spec, sampling):
    return lambda seed: Echo(f"{spec} {sampling.temperature} {sampling.max_new_tokens} {seed}")
"""


@pytest.fixture
def fake_worker_installed(tmp_path, monkeypatch):
    """An installed distribution whose entry point registers the scheme ``echo``."""
    (tmp_path / "fake_worker.py").write_text(FAKE_WORKER)
    info = tmp_path / "fake_worker-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-worker\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[{WORKER_ENTRY_POINTS}]\necho = fake_worker:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_registered_scheme_builds_its_policy(fake_worker_installed):
    assert check_worker("echo:big") == "echo:big"
    make = policy_factory("echo:big", get_strategy("none"), SamplingConfig(temperature=0.5))
    assert make(3).act([]) == PolicyOutput(text="big 0.5 256 3")


def test_an_unknown_scheme_names_the_registered_ones(fake_worker_installed):
    with pytest.raises(ValueError, match=r"unknown worker 'gpt:x'; valid: .*echo:<spec>"):
        check_worker("gpt:x")
    with pytest.raises(ValueError, match="unknown worker 'echo:'"):
        check_worker("echo:")


def test_the_project_registers_hf_from_ac_train():
    """Read from pyproject.toml, not from the installed metadata (which is only refreshed
    by reinstalling the package)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    workers = project["entry-points"][WORKER_ENTRY_POINTS]
    assert workers == {"hf": "ac_train.models.policy:hf_worker"}
    from ac_train.models.policy import hf_worker

    assert EntryPoint("hf", workers["hf"], WORKER_ENTRY_POINTS).load() is hf_worker
