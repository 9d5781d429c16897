"""The README and the docs/ pages are checked as a user would use them.

- Every relative link (file, and ``#anchor`` into a Markdown page) resolves.
- Every ```` ```python ```` block runs as a script, from the repository root. A block that
  needs a long run or a prepared resource is preceded by ``<!-- not-run: reason -->`` and is
  only compiled.
- Every command in a ```` ```bash ```` block that invokes our own programs (``ac-bench``,
  ``ac-env``, ``ac-train``, ``python -m ac_env...``/``ac_train...``, ``python examples/...``,
  ``python benchmarks/...``, ``python scripts/...``) is run up to the point where it has
  parsed its arguments (argparse, intercepted: nothing is executed after the parse), so a
  renamed flag, subcommand, entry point or a moved script fails here. ``bash scripts/X.sh``
  must exist and pass ``bash -n``.
- Nothing points at a shared folder outside the repository.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"<!--\s*not-run:\s*\S.*?-->\s*$")
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.S | re.M
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CONSOLE_SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str
    not_run: str | None  # the reason, where the block is marked not-run

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = NOT_RUN.search(before)
        body = "\n".join(line[len(m["indent"]) :] for line in m["body"].split("\n"))
        found.append(
            Block(page, text.count("\n", 0, m.start()) + 1, m["lang"], body, mark and mark.group(0))
        )
    return found


def prose(page: Path) -> str:
    """The page without its fenced blocks and inline code (where links are not links)."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text())
    return re.sub(r"`[^`\n]*`", "``", text)


def slug(heading: str) -> str:
    """The anchor python-markdown's toc (mkdocs) and GitHub give a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    return {slug(m[1]) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", prose_keep_code(page), re.M)}


def prose_keep_code(page: Path) -> str:
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text())


def all_blocks(lang: str) -> list[Block]:
    return [b for page in PAGES for b in blocks(page) if b.lang == lang]


def test_pages_are_found() -> None:
    names = {p.name for p in PAGES}
    assert {"README.md", "index.md", "environment.md", "grading-security.md"} <= names
    assert all_blocks("python") and all_blocks("bash")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("block", all_blocks("python"), ids=lambda b: b.where)
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    compile(block.body, block.where, "exec")
    if block.not_run:
        return
    script = tmp_path / "block.py"
    script.write_text(block.body)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env={**_env(), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{block.where} failed:\n{done.stdout}\n{done.stderr}"


# Runs a program until argparse has parsed its arguments, then exits 0 and says so: the
# outermost parse_args / parse_known_args call (subcommands' parsers are nested ones).
_DRY_PARSE = """
import argparse, os, runpy, sys
depth = 0
def wrap(orig):
    def parse(self, *args, **kwargs):
        global depth
        depth += 1
        try:
            result = orig(self, *args, **kwargs)
        finally:
            depth -= 1
        if depth == 0:
            print("ARGS-PARSED", flush=True)
            os._exit(0)
        return result
    return parse
argparse.ArgumentParser.parse_args = wrap(argparse.ArgumentParser.parse_args)
argparse.ArgumentParser.parse_known_args = wrap(argparse.ArgumentParser.parse_known_args)
kind, target, *argv = sys.argv[1:]
if kind == "entry":
    module, _, func = target.partition(":")
    sys.argv = [module, *argv]
    import importlib
    sys.exit(getattr(importlib.import_module(module), func)())
sys.argv = [target, *argv]
if kind == "module":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    runpy.run_path(target, run_name="__main__")
"""


@dataclass(frozen=True)
class Command:
    block: Block
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.block.where}: {shlex.join(self.argv)}"


def _commands(block: Block) -> list[Command]:
    text = re.sub(r"\\\n\s*", " ", block.body)
    found = []
    for line in text.split("\n"):
        for part in re.split(r"&&|;", line):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                continue  # e.g. eval "$(...)": not one of our programs
            while words and (words[0] in ("nohup", "nice", "-n") or words[0].isdigit()):
                words = words[1:]
            cut = [
                i for i, w in enumerate(words) if w in ("&", ">", "2>&1", "|") or w.startswith(">")
            ]
            words = words[: cut[0]] if cut else words
            if words and _ours(words):
                found.append(Command(block, tuple(words)))
    return found


def _ours(words: list[str]) -> bool:
    program = Path(words[0]).name
    if program in CONSOLE_SCRIPTS or (
        program == "bash" and words[1:2] and words[1].startswith("scripts/")
    ):
        return True
    if program.startswith("python") and len(words) > 1:
        if words[1] == "-m":
            return words[2].split(".")[0] in ("ac_env", "ac_train")
        return words[1].split("/")[0] in ("examples", "benchmarks", "scripts")
    return False


def all_commands() -> list[Command]:
    return [c for b in all_blocks("bash") for c in _commands(b)]


def test_commands_are_found() -> None:
    programs = {Path(c.argv[0]).name for c in all_commands()}
    assert {"ac-bench", "ac-env", "ac-train", "bash"} <= programs


@pytest.mark.parametrize("command", all_commands(), ids=str)
def test_command_exists_and_parses_its_arguments(command: Command) -> None:
    words = list(command.argv)
    program = Path(words[0]).name
    if program == "bash":
        script = ROOT / words[1]
        assert script.is_file(), f"{command}: {words[1]} does not exist"
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, f"{command}: {done.stderr}"
        return
    if program in CONSOLE_SCRIPTS:
        entry = CONSOLE_SCRIPTS[program]
        source = _module_file(entry.partition(":")[0])
        run = ["entry", entry, *words[1:]]
    elif words[1] == "-m":
        source = _module_file(words[2])
        run = ["module", words[2], *words[3:]]
    else:
        source = ROOT / words[1]
        assert source.is_file(), f"{command}: {words[1]} does not exist"
        run = ["path", str(source), *words[2:]]
    # A program that parses no arguments with argparse would run for real: refuse it.
    assert "argparse" in source.read_text(), f"{command}: {source} does not use argparse"
    done = subprocess.run(
        [sys.executable, "-c", _DRY_PARSE, *run],
        cwd=ROOT,
        env={**_env(), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "ARGS-PARSED" in done.stdout, (
        f"{command}: arguments not accepted (exit {done.returncode}):\n{done.stderr[-3000:]}"
    )


def _module_file(module: str) -> Path:
    base = ROOT / module.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__main__.py", base / "__init__.py"):
        if candidate.is_file():
            return candidate
    raise AssertionError(f"module {module} not found under {ROOT}")


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)
