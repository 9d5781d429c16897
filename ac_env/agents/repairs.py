"""Repair templates: candidate one-line fixes for a suspicious line of Python source.

Each template undoes one kind of common slip (the mutation operator families of the built-in
tasks are the same kinds of slips people make): a comparison or boundary flip, a swapped
arithmetic operator, an off-by-one bound, an inverted condition or boolean, a wrong constant
or default, swapped arguments. (A deleted statement cannot be guessed from the line around it;
no template tries: ``twins`` looks for it in other copies of the code.) Templates work on the
line's tokens, so text inside strings and comments is never touched. Lower ``priority`` means
"try earlier".
"""

from __future__ import annotations

import io
import keyword
import re
import textwrap
import tokenize
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

# Each template undoes one slip; the value is (replacement, priority).
_COMPARISONS = {
    "<": (("<=", 0), (">", 3)),
    "<=": (("<", 0), (">=", 3)),
    ">": ((">=", 0), ("<", 3)),
    ">=": ((">", 0), ("<=", 3)),
    "==": (("!=", 0),),
    "!=": (("==", 0),),
}
_ARITHMETIC = {
    "+": (("-", 0),),
    "-": (("+", 0),),
    "*": (("/", 0),),
    "/": (("*", 0), ("//", 1)),
    "+=": (("-=", 0),),
    "-=": (("+=", 0),),
}
_NAME_SWAPS = {
    "and": ("or", 1),
    "or": ("and", 1),
    "True": ("False", 2),
    "False": ("True", 2),
    "min": ("max", 3),
    "max": ("min", 3),
}
_NEGATABLE = ("if", "elif", "while")
_BOOLEANS = ("True", "False")
_VALUE_END = (tokenize.NAME, tokenize.NUMBER, tokenize.STRING)
_FLOAT = re.compile(r"^(\d+\.\d*|\.\d+)$")


@dataclass(frozen=True)
class LineFix:
    """A replacement for one line: the new text (may hold several lines) and a label."""

    new: str
    label: str
    priority: int


@dataclass(frozen=True)
class Edit:
    """A candidate fix located in the repo: replace the lines of ``path`` from ``line`` on
    that must still read ``old`` by ``new`` (both usually one line; several, newline-joined,
    when a statement comes back or goes)."""

    path: str
    line: int
    old: str
    new: str
    label: str
    priority: int

    @property
    def key(self) -> str:
        return f"{self.path}:{self.line} {self.label}"


def _tokens(code: str) -> list[tokenize.TokenInfo]:
    """The tokens of one line (a fragment of a longer statement is fine)."""
    return [t for t in _tokens_all(code) if t.start[0] == 1 and t.type != tokenize.COMMENT]


def _replace(line: str, start: int, end: int, text: str) -> str:
    return line[:start] + text + line[end:]


def _is_binary(tokens: list[tokenize.TokenInfo], index: int) -> bool:
    if index == 0:
        return False
    before = tokens[index - 1]
    if before.type == tokenize.NAME and keyword.iskeyword(before.string):
        return before.string in ("True", "False", "None")
    return before.type in _VALUE_END or before.string in (")", "]", "}")


def line_fixes(line: str) -> list[LineFix]:
    """All template fixes for ``line`` (without its newline), most likely first."""
    indent = len(line) - len(line.lstrip())
    tokens = _tokens(line.lstrip())
    fixes: dict[str, LineFix] = {}
    labels: dict[str, int] = {}
    for fix in (*_token_fixes(line, indent, tokens), *_swapped_arguments(line, indent, tokens)):
        if fix.new != line and fix.new not in fixes:
            labels[fix.label] = labels.get(fix.label, 0) + 1
            if labels[fix.label] > 1:  # the same change at another place of the line
                fix = LineFix(
                    fix.new, f"{fix.label} (occurrence {labels[fix.label]})", fix.priority
                )
            fixes[fix.new] = fix
    return sorted(fixes.values(), key=lambda f: f.priority)


def _token_fixes(line: str, indent: int, tokens: list[tokenize.TokenInfo]) -> Iterator[LineFix]:
    is_loop_header = bool(tokens) and tokens[0].string in ("for", "async")
    is_signature = bool(tokens) and tokens[0].string in ("def", "async")
    for index, token in enumerate(tokens):
        if is_signature and token.type != tokenize.NUMBER and token.string not in _BOOLEANS:
            continue  # in a signature only the defaults can be wrong
        start, end = indent + token.start[1], indent + token.end[1]
        text = token.string
        following = tokens[index + 1].string if index + 1 < len(tokens) else ""
        previous = tokens[index - 1].string if index else ""
        if token.type == tokenize.OP and text in _COMPARISONS:
            for new, priority in _COMPARISONS[text]:
                yield LineFix(_replace(line, start, end, new), f"`{text}` -> `{new}`", priority)
        elif token.type == tokenize.OP and text in _ARITHMETIC:
            if text in ("+", "-") and not _is_binary(tokens, index):
                continue
            for new, priority in _ARITHMETIC[text]:
                yield LineFix(_replace(line, start, end, new), f"`{text}` -> `{new}`", priority)
            if text in ("+", "-") and following == "1":
                first = indent + tokens[index - 1].end[1]
                dropped = _replace(line, first, indent + tokens[index + 1].end[1], "")
                yield LineFix(dropped, f"drop `{text} 1`", 1)
        elif token.type == tokenize.NAME and text in _NAME_SWAPS:
            new, priority = _NAME_SWAPS[text]
            yield LineFix(_replace(line, start, end, new), f"`{text}` -> `{new}`", priority)
        elif text in _NEGATABLE and following not in ("not", ""):
            yield LineFix(_replace(line, end, end, " not"), f"`{text}` -> `{text} not`", 1)
        elif text == "is":
            if following == "not":
                stop = indent + tokens[index + 1].end[1]
                yield LineFix(_replace(line, start, stop, "is"), "`is not` -> `is`", 1)
            else:
                yield LineFix(_replace(line, start, end, "is not"), "`is` -> `is not`", 1)
        elif text == "in" and not is_loop_header:
            if previous == "not":
                first = indent + tokens[index - 1].start[1]
                yield LineFix(_replace(line, first, end, "in"), "`not in` -> `in`", 1)
            else:
                yield LineFix(_replace(line, start, end, "not in"), "`in` -> `not in`", 1)
        elif text == "not" and following not in ("in", "") and previous != "is":
            stop = indent + tokens[index + 1].start[1]
            yield LineFix(_replace(line, start, stop, ""), "drop `not`", 1)
        elif token.type == tokenize.NUMBER:
            yield from _constant_fixes(line, start, end, text, previous)
        if token.type != tokenize.NUMBER and _ends_bound(tokens, index):
            for sign in ("+", "-"):
                yield LineFix(
                    _replace(line, end, end, f" {sign} 1"), f"`{text}` -> `{text} {sign} 1`", 2
                )


def _constant_fixes(line: str, start: int, end: int, text: str, previous: str) -> Iterator[LineFix]:
    """Integers one lower (or higher), floats halved (or a ``1.0`` back to zero)."""
    if text.isdigit():
        value = int(text)
        if value >= 1 and not (value == 1 and previous in ("+", "-")):
            yield LineFix(
                _replace(line, start, end, str(value - 1)), f"`{text}` -> `{value - 1}`", 1
            )
        yield LineFix(_replace(line, start, end, str(value + 1)), f"`{text}` -> `{value + 1}`", 3)
    elif _FLOAT.match(text):
        number = float(text)
        half = repr(number / 2)
        yield LineFix(_replace(line, start, end, half), f"`{text}` -> `{half}`", 1)
        if number == 1.0:
            yield LineFix(_replace(line, start, end, "0.0"), f"`{text}` -> `0.0`", 2)


def _ends_bound(tokens: list[tokenize.TokenInfo], index: int) -> bool:
    """Whether token ``index`` ends a slice bound (``x[a:b]``) or ``range``'s stop."""
    token = tokens[index]
    if not (token.type in (tokenize.NAME, tokenize.NUMBER) or token.string in (")", "]")):
        return False
    if index + 1 >= len(tokens) or tokens[index + 1].string not in (":", "]", ")", ","):
        return False
    depth = 0
    for back in range(index, -1, -1):
        text = tokens[back].string
        if text in (")", "]", "}"):
            depth += 1
        elif text in ("(", "[", "{"):
            if depth:
                depth -= 1
                continue
            caller = tokens[back - 1].string if back else ""
            if text == "[":
                inside = tokens[back + 1 : index + 2]
                return tokens[index + 1].string in ":]" and any(t.string == ":" for t in inside)
            return text == "(" and caller == "range" and tokens[index + 1].string == ")"
    return False


def _swapped_arguments(
    line: str, indent: int, tokens: list[tokenize.TokenInfo]
) -> Iterator[LineFix]:
    """A call's first two positional arguments, swapped back."""
    if tokens and tokens[0].string in ("def", "class", "async"):
        return
    for index, token in enumerate(tokens[:-1]):
        if token.type != tokenize.NAME or tokens[index + 1].string != "(":
            continue
        if keyword.iskeyword(token.string):
            continue
        bounds = _first_two_arguments(tokens, index + 1)
        if bounds is None:
            continue
        (a_start, a_end), (b_start, b_end) = (
            (indent + tokens[i].start[1], indent + tokens[j].end[1]) for i, j in bounds
        )
        first, second = line[a_start:a_end], line[b_start:b_end]
        swapped = line[:a_start] + second + line[a_end:b_start] + first + line[b_end:]
        yield LineFix(swapped, f"swap the first two arguments of `{token.string}`", 2)


def _first_two_arguments(
    tokens: list[tokenize.TokenInfo], opening: int
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Token index spans of the first two positional arguments after ``(`` at ``opening``."""
    spans: list[tuple[int, int]] = []
    depth, begin = 0, opening + 1
    for inner in range(opening + 1, len(tokens)):
        text = tokens[inner].string
        if text in ("(", "[", "{"):
            depth += 1
        elif text in (")", "]", "}") and depth:
            depth -= 1
        elif depth == 0 and text in (",", ")"):
            if inner > begin:
                spans.append((begin, inner - 1))
            if len(spans) == 2 or text == ")":
                break
            begin = inner + 1
        elif depth == 0 and text in ("=", "*", "**", "for", ":"):
            return None
    if len(spans) < 2:
        return None
    return spans[0], spans[1]


def _string_lines(lines: Mapping[int, str]) -> set[int]:
    """Line numbers covered by a multi-line string (docstrings), except a first line that
    holds code before the string."""
    numbers = sorted(lines)
    if not numbers:
        return set()
    source = textwrap.dedent("\n".join(lines[n] for n in numbers)) + "\n"
    rows = source.splitlines()
    inside: set[int] = set()
    for token in _tokens_all(source):
        if token.type != tokenize.STRING or token.start[0] == token.end[0]:
            continue  # one-line strings are skipped by the line's own tokens
        first, last = token.start[0], token.end[0]
        starts_line = not rows[first - 1][: token.start[1]].strip()
        covered = range(first if starts_line else first + 1, last + 1)
        inside.update(numbers[0] + row - 1 for row in covered)
    return inside


def _tokens_all(source: str) -> list[tokenize.TokenInfo]:
    found: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            found.append(token)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return found


def _line_scores(lines: Mapping[int, str], scores: Mapping[int, float]) -> dict[int, float]:
    """Scores for every line of a function. Tracing reports a statement once, on its first
    line, so a deeper-indented line without a score takes the score of the line above it
    (continuation lines); the ``def`` line, whose defaults every call uses, takes the best."""
    result: dict[int, float] = {}
    previous: tuple[int, float] | None = None
    for number, text in sorted(lines.items()):
        indent = len(text) - len(text.lstrip())
        if number in scores:
            result[number] = scores[number]
            previous = (indent, scores[number])
        elif previous is not None and text.strip() and indent > previous[0]:
            result[number] = previous[1]
    numbers = sorted(lines)
    if numbers and lines[numbers[0]].lstrip().startswith(("def ", "async def ")):
        result[numbers[0]] = max(scores.values(), default=0.0)
    return result


def function_edits(
    path: str, lines: Mapping[int, str], scores: Mapping[int, float]
) -> list[tuple[float, Edit]]:
    """Candidate edits for one function with the score of their line, most promising first:
    lines the failing runs implicate most (scores rounded to one decimal), then the
    template's priority."""
    edits: list[tuple[float, int, int, Edit]] = []
    inside_strings = _string_lines(lines)
    implicated = _line_scores(lines, scores)
    for number, text in sorted(lines.items()):
        stripped = text.strip()
        if not stripped or number in inside_strings or stripped.startswith(("#", "@")):
            continue
        score = round(implicated.get(number, 0.0), 1)
        for fix in line_fixes(text):
            edit = Edit(path, number, text, fix.new, fix.label, fix.priority)
            edits.append((-score, fix.priority, number, edit))
    edits.sort(key=lambda item: item[:3])
    return [(-negative, edit) for negative, _, _, edit in edits]
