"""The shipped catalogue of validated mutations (``catalog.json``, package data).

``python -m ac_env.tasks.synthetic.build_catalog`` writes it: for every candidate mutation of
every domain it runs the domain's real tests and keeps the mutants whose failing tests are
few, stable across three runs, and not collection errors. Task generation then only renders
files and applies catalogued edits.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ac_env.tasks.synthetic.domain import Domain, load_domain
from ac_env.tasks.synthetic.mutations import Mutation

CATALOG_PATH = Path(__file__).resolve().parent / "catalog.json"
CATALOG_FORMAT = 2
EVAL_SHARE = 5  # one single bug in five is held out for evaluation


class StaleCatalogError(RuntimeError):
    """The catalogue was built from other domain sources than the ones shipped."""


def single_id(domain: str, mutation: Mutation) -> str:
    """Catalogue id of the entry holding ``mutation`` alone."""
    return f"{domain}-{mutation.key()}"


class CatalogEntry(BaseModel):
    """One validated bug (one mutation) or a validated set of bugs (several mutations in
    different functions, whose failing tests do not overlap), and the tests it breaks.

    For each failing test, ``failing_statements`` holds the test's statement that failed
    and ``failure_messages`` the ``E`` lines pytest printed. ``wrong_patches_rejected`` and
    ``wrong_patches_accepted``: how many of its tasks' generated wrong patches that are not
    provably equivalent the domain's suite rejects and accepts (``strength``; None until
    graded); the suite plans tasks only from entries that accept none.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    domain: str
    mutations: list[Mutation]
    fail_to_pass: list[str]
    failing_statements: dict[str, str]
    failure_messages: dict[str, str]
    wrong_patches_rejected: int | None = None
    wrong_patches_accepted: int | None = None

    def subset(self) -> str:
        """``train`` or held-out ``eval``, by a hash of the first bug's single id; entries
        with several bugs are only built from bugs of one subset."""
        digest = hashlib.sha256(single_id(self.domain, self.mutations[0]).encode()).hexdigest()
        return "eval" if int(digest[:12], 16) % EVAL_SHARE == 0 else "train"


class DomainRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source_hash: str
    tests: list[str]
    candidates: int


class Catalog(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = CATALOG_FORMAT
    domains: dict[str, DomainRecord]
    entries: list[CatalogEntry]

    def single(self, domain: str, mutation: Mutation) -> CatalogEntry:
        """The entry holding ``mutation`` alone."""
        wanted = single_id(domain, mutation)
        return next(entry for entry in self.entries if entry.id == wanted)

    def pass_to_pass(self, entry: CatalogEntry) -> list[str]:
        """Every test of the entry's domain that the bug leaves passing."""
        broken = set(entry.fail_to_pass)
        return [test for test in self.domains[entry.domain].tests if test not in broken]


def domain_hash(domain: Domain) -> str:
    """Hash of a domain's files; the catalogue records the one it was built from."""
    digest = hashlib.sha256()
    for path in sorted(domain.files):
        digest.update(path.encode() + b"\0" + domain.files[path].encode() + b"\0")
    return digest.hexdigest()[:16]


def calls_bug_directly(entry: CatalogEntry, test_id: str) -> bool:
    """Whether the test's own source names a function the bug is in."""
    path, name = test_id.split("::", 1)
    source = load_domain(entry.domain).files[path]
    match = re.search(rf"^def {re.escape(name)}\(.*?(?=^\S|\Z)", source, re.S | re.M)
    body = match.group(0) if match else source
    return any(
        re.search(rf"(?<!\w){re.escape(m.function.rsplit('.', 1)[-1])}(?!\w)", body)
        for m in entry.mutations
    )


@cache
def load_catalog(path: Path = CATALOG_PATH) -> Catalog:
    """Read and check the catalogue against the shipped domain sources."""
    if not path.exists():
        raise StaleCatalogError(
            f"{path} is missing; run python -m ac_env.tasks.synthetic.build_catalog"
        )
    catalog = Catalog.model_validate_json(path.read_text())
    for name, record in catalog.domains.items():
        if record.source_hash != domain_hash(load_domain(name)):
            raise StaleCatalogError(
                f"{path}: domain {name!r} changed since the catalogue was built; "
                "run python -m ac_env.tasks.synthetic.build_catalog"
            )
    return catalog
