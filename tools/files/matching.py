"""Glob and grep matching for the rooted filesystem, in bounded time: glob segments by dynamic
programming (no exponential `**`), grep patterns on a linear-time engine.
"""

from __future__ import annotations

import fnmatch

from .safe_paths import PathRefusedError

try:  # google-re2: linear-time matching, so no pattern can make grep hang
    import re2 as _re2
except ImportError:  # pragma: no cover - the fallback puts a time limit on each line
    _re2 = None

_LINE_TIMEOUT_SEC = 0.2


def _segment_match(pattern: str, name: str) -> bool:
    if name.startswith(".") and not pattern.startswith("."):
        return False  # like the shell: '*' does not match hidden names
    return fnmatch.fnmatchcase(name, pattern)


def glob_match(pattern: list[str], parts: list[str]) -> bool:
    """Whether path `parts` match glob `pattern` segments; `**` matches zero or more folders.

    Dynamic programming over (pattern index, path index): O(len(pattern) * len(parts)).
    """
    reach = {0}
    for part in parts:
        nxt: set[int] = set()
        for i in _closure(pattern, reach):
            if i < len(pattern):
                if pattern[i] == "**":
                    if not part.startswith("."):
                        nxt.add(i)  # '**' absorbs this folder too
                elif _segment_match(pattern[i], part):
                    nxt.add(i + 1)
        reach = nxt
        if not reach:
            return False
    return len(pattern) in _closure(pattern, reach)


def _closure(pattern: list[str], states: set[int]) -> set[int]:
    """States plus those reached by letting each '**' match nothing."""
    out = set(states)
    todo = list(states)
    while todo:
        i = todo.pop()
        if i < len(pattern) and pattern[i] == "**" and i + 1 not in out:
            out.add(i + 1)
            todo.append(i + 1)
    return out


def compile_search(pattern: str, *, ignore_case: bool = False, fixed: bool = False):
    """A `line -> bool` search that cannot be driven exponential.

    RE2 (google-re2) matches in linear time and refuses backreferences and lookaround; without
    it, Python's `regex` module runs each line under a time limit.
    """
    if len(pattern) > 2000:
        raise PathRefusedError(pattern, "bad_pattern", "the pattern is over 2,000 characters")
    if fixed:
        needle = pattern.lower() if ignore_case else pattern
        return (
            (lambda line: needle in line.lower()) if ignore_case else (lambda line: needle in line)
        )
    if _re2 is not None:
        options = _re2.Options()
        options.case_sensitive = not ignore_case
        options.log_errors = False
        options.max_mem = 32 << 20
        try:
            compiled = _re2.compile(pattern, options)
        except _re2.error as exc:
            why = exc.args[0] if exc.args else exc
            why = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
            raise PathRefusedError(
                pattern,
                "bad_pattern",
                f"not a valid regular expression for the linear-time engine (RE2: no "
                f"backreferences or lookaround): {why}",
            ) from None
        return lambda line: compiled.search(line) is not None
    import regex as _regex  # lazy: only without google-re2 (a dependency: never reached)

    try:
        compiled_re = _regex.compile(pattern, _regex.IGNORECASE if ignore_case else 0)
    except _regex.error as exc:
        raise PathRefusedError(
            pattern, "bad_pattern", f"not a valid regular expression: {exc}"
        ) from None

    def search(line: str) -> bool:
        try:
            return compiled_re.search(line, timeout=_LINE_TIMEOUT_SEC) is not None
        except TimeoutError:
            raise PathRefusedError(
                pattern,
                "bad_pattern",
                f"the pattern took over {_LINE_TIMEOUT_SEC:g} s on one line (catastrophic "
                "backtracking); simplify it, e.g. no nested repeats like (a+)+",
            ) from None

    return search


def split_lines(text: str) -> list[str]:
    """Lines split on "\n" only (as editors and grep count them), each keeping its newline."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]
