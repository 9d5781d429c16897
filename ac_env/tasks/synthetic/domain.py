"""The hand-written domain projects the built-in suite is made from.

Each domain lives under ``domains/<name>/`` as package data: ``domain.json`` (package name,
version, README text, wording for bug reports) and the project's files, each stored with an
extra ``.txt`` suffix so that tools never mistake the templates for ``ac_env`` code
(``ledgerly/core/money.py`` is stored as ``ledgerly/core/money.py.txt``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DOMAINS_DIR = Path(__file__).resolve().parent / "domains"
TEMPLATE_SUFFIX = ".txt"
DOMAIN_NAMES = ("ledgerly", "datewise", "stencil")


@dataclass(frozen=True)
class Domain:
    """One domain project: metadata plus its files (repo-relative path -> text)."""

    name: str
    package: str
    version: str
    title: str
    description: str
    usage: str
    user_roles: tuple[str, ...]
    files: dict[str, str]

    def source_modules(self) -> list[str]:
        """Repo-relative paths of the package's modules (tests excluded), sorted."""
        return sorted(
            path
            for path in self.files
            if path.startswith(f"{self.package}/") and path.endswith(".py")
        )

    def test_files(self) -> list[str]:
        """Repo-relative paths of the test files, conftest included, sorted."""
        return sorted(p for p in self.files if p.startswith("tests/") and p.endswith(".py"))


@cache
def load_domain(name: str) -> Domain:
    """Read a domain from package data; unknown names raise ``ValueError``."""
    if name not in DOMAIN_NAMES:
        raise ValueError(f"unknown domain {name!r}; known: {', '.join(DOMAIN_NAMES)}")
    root = DOMAINS_DIR / name
    meta = json.loads((root / "domain.json").read_text())
    files = {
        path.relative_to(root).as_posix()[: -len(TEMPLATE_SUFFIX)]: path.read_text()
        for path in sorted(root.rglob(f"*{TEMPLATE_SUFFIX}"))
    }
    return Domain(
        name=name,
        package=meta["package"],
        version=meta["version"],
        title=meta["title"],
        description=meta["description"],
        usage=meta["usage"],
        user_roles=tuple(meta["user_role"]),
        files=files,
    )


def all_domains() -> list[Domain]:
    return [load_domain(name) for name in DOMAIN_NAMES]


def write_files(files: dict[str, str], root: Path) -> None:
    """Write ``files`` (repo-relative path -> text) under ``root``."""
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
