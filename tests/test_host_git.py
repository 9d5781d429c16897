"""``ac_env.host_git``: the one way the host runs git, with nobody's configuration."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ac_env.host_git import HostGitError, git_text, run_git


def hostile_repo(root: Path, marker: Path) -> Path:
    """A repository whose own config and hooks would run a command if git honoured them."""
    repo = root / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    with (repo / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = hooks\n")
    hook = repo / "hooks" / "pre-commit"
    hook.parent.mkdir()
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    return repo


def test_no_hook_or_monitor_of_the_repository_runs(tmp_path):
    marker = tmp_path / "ran"
    repo = hostile_repo(tmp_path, marker)
    git_text(["add", "-A"], cwd=repo, identity=True)
    git_text(["commit", "-q", "-m", "base"], cwd=repo, identity=True)
    git_text(["status", "--porcelain"], cwd=repo)
    assert not marker.exists()
    # the same git without the isolation runs the repository's hook: the test can fail
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"])
    assert marker.exists()


def test_commits_with_the_fixed_identity_are_reproducible(tmp_path):
    hashes = []
    for name in ("one", "two"):
        repo = tmp_path / name
        repo.mkdir()
        (repo / "f.py").write_text("x = 1\n")
        git_text(["init", "-q", "-b", "main"], cwd=repo)
        git_text(["add", "-A"], cwd=repo, identity=True)
        git_text(["commit", "-q", "-m", "base"], cwd=repo, identity=True)
        hashes.append(git_text(["rev-parse", "HEAD"], cwd=repo).strip())
    assert hashes[0] == hashes[1]
    author = run_git(["log", "-1", "--format=%an %ae %aI"], git_dir=tmp_path / "one" / ".git")
    assert (
        author.decode().strip() == "AutoCompact tasks@autocompact.invalid 2024-01-15T12:00:00+00:00"
    )


def test_a_failure_names_the_subcommand_and_gits_error(tmp_path):
    with pytest.raises(HostGitError, match="git rev-parse failed on .*not a git repository"):
        git_text(["rev-parse", "HEAD"], cwd=tmp_path, ceiling=tmp_path.parent)
