"""Bug reports written from failing tests."""

import random

from ac_env.tasks.synthetic.statements import (
    BugLocation,
    describe_failure,
    observed_behaviour,
    render_report,
)

CONFTEST = '''import pytest

from shop import Cart


@pytest.fixture
def cart():
    """A cart with two items."""
    basket = Cart()
    basket.add("mug", 2)
    return basket
'''

TEST_MODULE = """from pathlib import Path

import pytest

from shop import Cart, checkout
from shop.money import parse

DATA = Path(__file__).resolve().parent.parent / "data" / "prices.csv"


def prices():
    return {"mug": 3}


def test_total_of_cart(cart):
    total = checkout(cart, prices())
    assert total == 6


def test_rejects_negative(cart):
    with pytest.raises(ValueError, match="negative"):
        cart.add("mug", -1)


def test_reads_price_file():
    assert parse(DATA.read_text()) is not None
"""

LOCATION = BugLocation(files=["shop/pricing.py"], functions=["Pricer.line_total"])


def symptom(test, statement, message):
    return describe_failure(
        f"tests/test_shop.py::{test}", TEST_MODULE, CONFTEST, statement, message
    )


def test_snippet_inlines_fixture_helpers_and_imports():
    found = symptom("test_total_of_cart", "assert total == 6", "assert 5 == 6")
    assert found is not None
    assert found.snippet.splitlines()[0] == "from shop import Cart"
    assert "basket.add('mug', 2)" in found.snippet or 'basket.add("mug", 2)' in found.snippet
    assert "cart = basket" in found.snippet
    assert "def prices():" in found.snippet
    assert "print(total)  # expected: 6" in found.snippet
    assert "from shop.money" not in found.snippet
    assert found.observed == "`total` gives `5`."


def test_expected_exception_becomes_the_expectation():
    found = symptom(
        "test_rejects_negative", 'cart.add("mug", -1)', "Failed: DID NOT RAISE <class 'ValueError'>"
    )
    assert found is not None
    assert "`ValueError` to be raised" in found.expectation
    assert "No `ValueError` is raised" in found.observed


def test_paths_relative_to_the_test_file_become_repo_relative():
    found = symptom("test_reads_price_file", "", "")
    assert found is not None
    assert 'DATA = Path(".") / "data" / "prices.csv"' in found.snippet


def test_unexpected_exception_is_quoted_without_traceback():
    text, raised = observed_behaviour(
        "total = checkout(cart, prices())", "ZeroDivisionError: division by zero", None
    )
    assert raised == "ZeroDivisionError"
    assert "ZeroDivisionError: division by zero" in text


def test_report_is_refused_when_it_names_the_bug_location():
    found = symptom("test_total_of_cart", "assert total == 6", "assert 5 == 6")
    assert found is not None
    rng = random.Random(0)
    report = render_report(rng, [found], "shop", "1.0", ("I sell mugs",), LOCATION)
    assert report is not None and report.startswith("### ")
    named = BugLocation(files=["shop/checkout.py"], functions=["checkout"])
    assert render_report(rng, [found], "shop", "1.0", ("I sell mugs",), named) is None
    assert BugLocation(["shop/pricing.py"], []).leaks("see shop.pricing for details")


def test_second_symptom_becomes_a_follow_up():
    first = symptom("test_total_of_cart", "assert total == 6", "assert 5 == 6")
    second = symptom(
        "test_rejects_negative", 'cart.add("mug", -1)', "Failed: DID NOT RAISE <class 'ValueError'>"
    )
    assert first is not None and second is not None
    report = render_report(random.Random(1), [first, second], "shop", "1.0", ("We",), LOCATION)
    assert report is not None
    assert report.count("```python") == 2
    assert "rejects negative" in report
