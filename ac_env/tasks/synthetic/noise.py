"""Noise that grows an agent's context the way real work does.

- a large generated data file per domain (an agent may ``cat`` it in full by mistake);
- a noisy nightly log under ``logs/`` (context-stress);
- an autouse fixture that logs set-up details at DEBUG, shown by ``pytest -rA`` for every
  test when the project's pytest ``log_level`` is DEBUG (context-stress).
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable

CATEGORIES = ("TEE", "MUG", "CAP", "BAG", "SOCK", "PEN", "CUP", "HAT")
WORDS = (
    "alpha",
    "bravo",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "grove",
    "harbor",
    "iris",
    "juniper",
    "kestrel",
    "lumen",
    "maple",
    "nectar",
    "orchid",
    "pebble",
    "quartz",
)
LEVELS = ("DEBUG", "DEBUG", "DEBUG", "INFO", "INFO", "WARNING")


def _ledgerly_rows(rng: random.Random, count: int) -> tuple[str, str]:
    lines = ["date,sku,kind,quantity,unit_cost,reference"]
    day = dt.date(2023, 1, 2)
    for index in range(count):
        day += dt.timedelta(days=rng.random() < 0.2)
        sku = f"{rng.choice(CATEGORIES)}-{rng.randint(1, 60):04d}"
        if rng.random() < 0.55:
            cost = f"{rng.randint(100, 4000) / 100:.2f}"
            lines.append(f"{day},{sku},receipt,{rng.randint(1, 80)},{cost},PO-{1000 + index}")
        else:
            lines.append(f"{day},{sku},issue,{rng.randint(1, 12)},,SO-{5000 + index}")
    return "data/movements_2023.csv", "\n".join(lines) + "\n"


def _datewise_rows(rng: random.Random, count: int) -> tuple[str, str]:
    lines = ["date,start,duration,rule,title"]
    day = dt.date(2024, 1, 1)
    for _ in range(count):
        day += dt.timedelta(days=rng.choice((0, 0, 1, 2)))
        rule = rng.choice(("daily", "weekly", "monthly", "once"))
        duration = rng.choice(("30m", "1h", "1h30m", "2h", "45m", "15m", "1d"))
        title = f"{rng.choice(WORDS)} {rng.choice(WORDS)} review"
        lines.append(
            f"{day},{rng.randint(7, 18):02d}:{rng.choice((0, 15, 30, 45)):02d},"
            f"{duration},{rule},{title}"
        )
    return "data/calendar_export.csv", "\n".join(lines) + "\n"


def _stencil_rows(rng: random.Random, count: int) -> tuple[str, str]:
    lines = []
    for index in range(count):
        item = {
            "id": index + 1,
            "name": f"{rng.choice(WORDS).title()} {rng.choice(WORDS)}",
            "price": rng.randint(100, 90000) / 100,
            "stock": rng.randint(0, 500),
            "tags": rng.sample(WORDS, 2),
        }
        lines.append(json.dumps(item))
    return "data/products.jsonl", "\n".join(lines) + "\n"


DATA_FILES: dict[str, Callable[[random.Random, int], tuple[str, str]]] = {
    "ledgerly": _ledgerly_rows,
    "datewise": _datewise_rows,
    "stencil": _stencil_rows,
}


def data_file(domain: str, rng: random.Random, rows: int) -> tuple[str, str]:
    """(path, text) of the domain's large generated data file."""
    return DATA_FILES[domain](rng, rows)


def log_file(
    rng: random.Random, modules: list[str], keywords: list[str], lines: int
) -> tuple[str, str]:
    """(path, text) of a noisy nightly log that mentions the package's modules."""
    moment = dt.datetime(2024, 3, rng.randint(1, 28), 2, 0, 0)
    out = []
    for index in range(lines):
        moment += dt.timedelta(milliseconds=rng.randint(1, 900))
        level = rng.choice(LEVELS)
        module = rng.choice(modules)
        if level == "WARNING" and keywords and rng.random() < 0.3:
            text = f"retrying after {' '.join(keywords)} mismatch in batch {index // 50}"
        else:
            text = (
                f"{rng.choice(('processed', 'loaded', 'cached', 'skipped', 'checked'))} "
                f"{rng.randint(1, 999)} {rng.choice(WORDS)} records "
                f"in {rng.randint(1, 400)} ms"
            )
        out.append(
            f"{moment:%Y-%m-%d %H:%M:%S},{moment.microsecond // 1000:03d} {level:<7} "
            f"{module}: {text}"
        )
    return f"logs/nightly-{moment:%Y-%m-%d}.log", "\n".join(out) + "\n"


def verbose_fixture(rng: random.Random, package: str, data_path: str) -> str:
    """Text appended to ``tests/conftest.py``: an autouse fixture that logs at DEBUG."""
    steps = rng.sample(
        (
            "environment",
            "locale",
            "fixtures",
            "clock",
            "cache",
            "settings",
            "sample data",
            "temp files",
            "random seed",
            "registry",
        ),
        6,
    )
    logged = "\n".join(
        f'    _setup_log.debug("%s: %s ready (%s)", request.node.nodeid, "{step}", "{data_path}")'
        for step in steps
    )
    return (
        "\n\nimport logging as _logging\n\n"
        f'_setup_log = _logging.getLogger("{package}.tests.setup")\n\n\n'
        "@pytest.fixture(autouse=True)\n"
        "def _log_test_setup(request):\n"
        '    """Log what each test starts from; shown with pytest -rA at DEBUG."""\n'
        f"{logged}\n"
        "    yield\n"
        '    _setup_log.debug("%s: teardown complete", request.node.nodeid)\n'
    )
