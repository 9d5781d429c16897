import pytest

from ac_env.actions import (
    SUMMARY_HEADER,
    Bash,
    Compact,
    FormatError,
    JSONToolCallParser,
    Submit,
    TerminalParser,
    ends_an_action,
    make_parser,
)

parse = TerminalParser().parse


def test_one_bash_block_is_a_command():
    action = parse("THOUGHT: look around\n```bash\ngrep -rn 'def ' src | head\n```")
    assert action == Bash(command="grep -rn 'def ' src | head")


def test_multiline_command_and_trailing_text():
    action = parse("```bash\ncd src &&\n  ls\n```\nthen I will read it")
    assert action == Bash(command="cd src &&\n  ls")


def test_submit_block():
    assert parse("Done.\n```bash\nsubmit\n```") == Submit()
    assert parse("```bash\n  submit  \n```") == Submit()


def test_submit_with_more_is_a_command_not_submit():
    assert parse("```bash\nsubmit && ls\n```") == Bash(command="submit && ls")


def test_summary_is_compact_and_keeps_whole_text():
    text = "# Auto Context Summary\n## Known\nx\n## Workspace\ny\n## Next\nz"
    assert parse("\n" + text + "\n") == Compact(summary=text)


def test_summary_may_contain_code_blocks():
    text = "# Auto Context Summary\n## Next\nrun\n```bash\npytest\n```"
    assert isinstance(parse(text), Compact)


@pytest.mark.parametrize(
    ("response", "fragment"),
    [
        ("I think the bug is in the parser.", "No action found"),
        ("```python\nprint(1)\n```", "opened with ```bash"),
        ("```bash\nls\n```\n```bash\npwd\n```", "Found 2 bash blocks"),
        ("```bash\nls\n```\n# Auto Context Summary\n## Known\nx", "must start the response"),
        ("```bash\n   \n```", "empty"),
        (None, "must be text, got NoneType"),
        (42, "must be text, got int"),
        ("", "No action found"),
    ],
)
def test_malformed_responses_are_format_errors(response, fragment):
    result = parse(response)
    assert isinstance(result, FormatError)
    assert fragment in result.message


def test_action_objects_pass_through():
    assert parse(Bash(command="ls")) == Bash(command="ls")
    assert parse(Submit()) == Submit()


def test_render_round_trips():
    for action in (Bash(command="ls -la"), Submit(), Compact(summary="# Auto Context Summary")):
        assert parse(action.render()) == action


def test_json_parser():
    p = JSONToolCallParser()
    assert p.parse('{"name": "bash", "arguments": {"command": "ls"}}') == Bash(command="ls")
    assert p.parse('{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}') == Bash(
        command="ls"
    )
    assert p.parse([{"function": {"name": "submit", "arguments": "{}"}}]) == Submit()
    assert p.parse({"name": "compact", "arguments": {"summary": "s"}}) == Compact(summary="s")
    for bad, fragment in [
        ("not json", "not valid JSON"),
        ("[]", "Found 0 tool calls"),
        ('{"name": "rm"}', "Unknown tool 'rm'"),
        ('{"name": "bash", "arguments": {}}', "missing its argument"),
        ("3", "JSON object"),
    ]:
        result = p.parse(bad)
        assert isinstance(result, FormatError), bad
        assert fragment in result.message


def test_make_parser_names_valid_choices():
    with pytest.raises(ValueError, match="valid: \\['json', 'terminal'\\]"):
        make_parser("xml")


@pytest.mark.parametrize(
    ("text", "ended"),
    [
        ("I will list the files.\n```bash\nls", False),  # the block is still open
        ("I will list the files.\n```bash\nls\n``", False),
        ("I will list the files.\n```bash\nls\n```", True),
        ("```bash\nsubmit\n```\nThen I", True),
        ("Some `inline` code and ```python\nx = 1\n```", False),  # no bash block
        (f"{SUMMARY_HEADER}\n## Workspace\n```bash\nls\n```", False),  # a summary runs on
        (f"\n  {SUMMARY_HEADER}\n```bash\nls\n```", False),
    ],
)
def test_an_action_ends_where_its_first_bash_block_closes_unless_it_is_a_summary(text, ended):
    assert ends_an_action(text) is ended


@pytest.mark.parametrize(
    "response",
    [
        "Look first.\n```bash\nls -la\n```\nThen ```bash\npytest\n```",  # two blocks
        "```bash\nls\n```\n" + SUMMARY_HEADER,  # a misplaced summary
        "```bash\ncat a.py\n```\nand some words after it",
    ],
)
def test_text_after_an_ended_action_cannot_change_it_to_another_valid_action(response):
    """Where ``ends_an_action`` first holds, the parser gives the action it would give the
    whole response, or the whole response is no valid action: stopping there loses nothing."""
    cut = next(i for i in range(len(response) + 1) if ends_an_action(response[:i]))
    at_stop, whole = TerminalParser().parse(response[:cut]), TerminalParser().parse(response)
    assert not isinstance(at_stop, FormatError)
    assert whole == at_stop or isinstance(whole, FormatError)
