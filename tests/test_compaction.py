from ac_env.compaction import (
    SUMMARY_TEMPLATE,
    CommandRecord,
    extractive_summary,
    files_read,
    last_run_line,
    parse_sections,
    summary_problems,
)

GOOD = "# Auto Context Summary\n## Known\nbug in a\n## Workspace\nnone\n## Next\nfix it"


def test_short_and_template_section_names_validate():
    assert summary_problems(GOOD) == []
    filled = SUMMARY_TEMPLATE.replace("<", "").replace(">", "")
    assert summary_problems(filled) == []
    aliased = (
        "# Auto Context Summary\n## Confirmed findings\nx\n## Workspace state\ny\n## Next step\nz"
    )
    assert summary_problems(aliased) == []


def test_missing_and_empty_sections_are_named():
    problems = summary_problems("# Auto Context Summary\n## Known\nx\n## Workspace\n\n")
    assert "section '## Workspace' is empty" in problems
    assert "missing section '## Next'" in problems
    assert summary_problems("# Auto Context Summary") == [
        "missing section '## Known'",
        "missing section '## Workspace'",
        "missing section '## Next'",
    ]
    assert summary_problems("hello")[0].startswith("the summary must start")


def test_parse_sections():
    assert parse_sections(GOOD) == {"known": "bug in a", "workspace": "none", "next": "fix it"}


PYTEST_OUT = """....F
FAILED tests/test_dates.py::test_leap - AssertionError
========== 1 failed, 4 passed in 0.12s ==========
"""


def test_extractive_summary_reflects_real_state():
    commands = [
        CommandRecord("grep -rn parse_date src", "src/a.py:3:def parse_date", 0),
        CommandRecord("cat src/calendar/dates.py | head -50", "...", 0),
        CommandRecord("sed -n 1,40p ./src/util.py", "...", 0),
        CommandRecord("python -m pytest -q", PYTEST_OUT, 1),
    ]
    diff = "diff --git a/src/calendar/dates.py b/src/calendar/dates.py\n--- a\n+++ b\n"
    summary = extractive_summary("Leap days are wrong\nmore text", commands, diff)
    assert summary_problems(summary) == []
    sections = parse_sections(summary)
    assert "src/calendar/dates.py" in sections["workspace"]
    assert "src/calendar/dates.py, src/util.py" in sections["known"]
    assert "1 failed, 4 passed" in sections["tests"]
    assert "tests/test_dates.py::test_leap" in sections["tests"]
    assert sections["next"] == "- fix the remaining failures, then re-run the tests"
    assert sections["task"] == "Leap days are wrong"


def test_extractive_summary_without_work():
    summary = extractive_summary("task", [], "")
    sections = parse_sections(summary)
    assert "no changes yet" in sections["workspace"]
    assert "no test run yet" in sections["tests"]
    assert sections["next"].startswith("- locate the bug")


def test_helpers():
    cmds = [
        CommandRecord("cat a.py b.txt && head -5 c.py", "", 0),
        CommandRecord("ls", "", 0),
        CommandRecord("# read the suspect\nsed -n 1,20p d.py", "", 0),
        CommandRecord("sed -i 's/a/b/' e.py", "", 0),
    ]
    assert files_read(cmds) == ["a.py", "b.txt", "c.py", "d.py"]
    assert last_run_line(cmds) is None
    run = last_run_line([CommandRecord("pytest -x", "", 2)])
    assert run == "`pytest -x` -> exit code 2"
