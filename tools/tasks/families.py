"""Task families: one skill each, its variant drawn from a seeded random generator.

A family is a function `(rng) -> TaskParts`: the instruction, the input files under /app, the one
shell command that solves it and the verifier's test. What varies with the seed: the file names,
the values, the input's format (lines, commas, a CSV column; `key=value`, `key: value`...), the
wording of the instruction. Only the base tools (coreutils, awk, sed, grep) are needed; generated
text never holds a quote, `%` or a backslash, so it goes into `printf` as it is.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

_STEMS = (
    "data notes items records values readings scores inventory metrics samples ledger entries "
    "batch report queue catalog stock orders visits events"
).split()
_EXTS = (".txt", ".dat", ".lst", ".log")
_OUTS = "result answer total count output summary figure tally final value".split()
_WORDS = (
    "apple river stone cloud maple tiger lemon orbit pixel candle harbor meadow falcon copper "
    "violet garden rocket silver thunder willow marble anchor breeze canyon ember forest glacier "
    "island jungle lantern"
).split()
_KEYS = "port host user timeout retries mode level region bucket owner theme color".split()


class TaskParts(BaseModel):
    """What a family decides; the generator (tools/tasks/generator.py) turns it into the five
    files of a Harbor task."""

    category: str
    instruction: str
    inputs: dict[str, str] = Field(description="absolute path under /app -> content")
    solve: str = Field(description="the one shell command that solves it")
    check: str = Field(description="the verifier's test: a shell condition")
    about: str = Field(description="the verifier's comment: what it checks")


def printf_text(text: str) -> str:
    """`text` as a printf format in single quotes (generated text holds no quote or %)."""
    assert "'" not in text and "%" not in text and "\\" not in text, text
    return "'" + text.replace("\n", "\\n") + "'"


def _file(rng: random.Random, stems: Sequence[str] = _STEMS) -> str:
    return f"/app/{rng.choice(stems)}{rng.choice(_EXTS)}"


def _out(rng: random.Random, avoid: str) -> str:
    name = f"/app/{rng.choice(_OUTS)}.txt"
    return name if name != avoid else "/app/out.txt"


def _equals(path: str, value: str) -> str:
    return f'[ "$(tr -d \' \\n\' < {path})" = "{value}" ]'


def _same(path: str, expected: str) -> str:
    return f"printf {printf_text(expected)} | cmp -s - {path}"


# -- families: one skill each ---------------------------------------------------------------------
def _word_file(rng: random.Random) -> tuple[str, str, list[str]]:
    """A counting task's input file, its output file and the input's lines (one word each)."""
    src = _file(rng)
    return src, _out(rng, src), [rng.choice(_WORDS) for _ in range(rng.randint(6, 30))]


def count_lines(rng: random.Random) -> TaskParts:
    """The line count of a file, or (half the variants) the lines equal to a word."""
    src, out, lines = _word_file(rng)
    if rng.random() < 0.5:
        word = rng.choice(lines)
        n = sum(1 for w in lines if w == word)
        instruction = rng.choice(
            [
                f"How many lines of `{src}` are exactly the word `{word}`? "
                f"Write that number to `{out}`.",
                f"Each line of `{src}` holds one word. Put the count of lines equal to "
                f"`{word}` into `{out}`.",
            ]
        )
        solve, about = f"grep -cx {word} {src} > {out}", f"lines of {src} equal to {word}: {n}"
        return _counted(src, out, lines, n, instruction, solve, about)
    return _all_lines(rng, src, out, lines)


def line_count(rng: random.Random) -> TaskParts:
    """The line count of a file, the plain form of count-lines alone: the skill the learning
    demonstration trains (the embedded cold start's policy solves it sometimes, the word form
    never: benchmarks/RESULTS.md)."""
    src, out, lines = _word_file(rng)
    return _all_lines(rng, src, out, lines)


def _all_lines(rng: random.Random, src: str, out: str, lines: list[str]) -> TaskParts:
    instruction = rng.choice(
        [
            f"Find how many lines `{src}` has and save the number in `{out}`.",
            f"Write the number of lines in the file `{src}` to `{out}`.",
            f"`{out}` must contain the line count of `{src}` (just the number).",
        ]
    )
    solve, about = f"wc -l < {src} > {out}", f"line count of {src}: {len(lines)}"
    return _counted(src, out, lines, len(lines), instruction, solve, about)


def _counted(
    src: str, out: str, lines: list[str], n: int, instruction: str, solve: str, about: str
) -> TaskParts:
    return TaskParts(
        category="text-processing",
        instruction=instruction,
        inputs={src: "\n".join(lines) + "\n"},
        solve=solve,
        check=_equals(out, str(n)),
        about=about,
    )


def sum_numbers(rng: random.Random) -> TaskParts:
    src = _file(rng)
    out = _out(rng, src)
    numbers = [rng.randint(1, 999) for _ in range(rng.randint(4, 15))]
    total = str(sum(numbers))
    form = rng.choice(["lines", "commas", "csv"])
    if form == "lines":
        content = "\n".join(map(str, numbers)) + "\n"
        instruction = rng.choice(
            [
                f"`{src}` lists one whole number per line. Add them up and write the total "
                f"to `{out}`.",
                f"Compute the sum of the integers in `{src}` (one per line) into `{out}`.",
            ]
        )
        solve = f"awk '{{s+=$1}} END {{print s}}' {src} > {out}"
    elif form == "commas":
        content = ",".join(map(str, numbers)) + "\n"
        instruction = rng.choice(
            [
                f"`{src}` is a single line of comma-separated integers. Write their sum "
                f"to `{out}`.",
                f"Add the comma-separated numbers on the one line of `{src}`; the total goes "
                f"in `{out}`.",
            ]
        )
        solve = f"tr , '\\n' < {src} | awk '{{s+=$1}} END {{print s}}' > {out}"
    else:
        column = rng.choice(["amount", "qty", "price", "points", "weight"])
        src = src.rsplit(".", 1)[0] + ".csv"
        rows = [f"{rng.choice(_WORDS)},{n}" for n in numbers]
        content = f"name,{column}\n" + "\n".join(rows) + "\n"
        instruction = rng.choice(
            [
                f"`{src}` is a CSV file with a header. Sum its `{column}` column and write "
                f"the total to `{out}`.",
                f"Write the total of the `{column}` column of the CSV `{src}` (skip the header) "
                f"to `{out}`.",
            ]
        )
        solve = f"awk -F, 'NR>1{{s+=$2}} END {{print s}}' {src} > {out}"
    return TaskParts(
        category="text-processing",
        instruction=instruction,
        inputs={src: content},
        solve=solve,
        check=_equals(out, total),
        about=f"sum of {src} ({form}): {total}",
    )


def config_value(rng: random.Random) -> TaskParts:
    keys = rng.sample(_KEYS, rng.randint(3, 6))
    values = {k: rng.choice(_WORDS) + str(rng.randint(1, 99)) for k in keys}
    key = rng.choice(keys)
    sep = rng.choice(["=", ": ", " "])
    src = f"/app/{rng.choice(['app', 'service', 'server', 'worker', 'site'])}" + rng.choice(
        [".conf", ".cfg", ".ini", ".env"]
    )
    out = _out(rng, src)
    content = "".join(f"{k}{sep}{v}\n" for k, v in values.items())
    shown = {"=": "`key=value`", ": ": "`key: value`", " ": "`key value`"}[sep]
    instruction = rng.choice(
        [
            f"`{src}` holds settings as {shown} lines. Write the value of `{key}` to `{out}`.",
            f"Read the `{key}` setting from `{src}` (lines of the form {shown}) and save "
            f"only its value in `{out}`.",
        ]
    )
    field = {"=": "-F=", ": ": "-F': '", " ": ""}[sep]
    solve = f"awk {field} '$1==\"{key}\" {{print $2}}' {src} > {out}".replace("awk  ", "awk ")
    return TaskParts(
        category="config-edit",
        instruction=instruction,
        inputs={src: content},
        solve=solve,
        check=_equals(out, values[key]),
        about=f"value of {key} in {src}: {values[key]}",
    )


def replace_word(rng: random.Random) -> TaskParts:
    old, new = rng.sample(_WORDS, 2)
    src = _file(rng)
    lines = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 5))) for _ in range(5)]
    lines[rng.randrange(5)] += f" {old}"
    lines[rng.randrange(5)] = f"{old} " + lines[rng.randrange(5)]
    before = "\n".join(lines) + "\n"
    after = "\n".join(" ".join(new if w == old else w for w in ln.split()) for ln in lines) + "\n"
    instruction = rng.choice(
        [
            f"Edit `{src}` in place: every occurrence of the word `{old}` becomes `{new}`.",
            f"In the file `{src}`, change each `{old}` to `{new}` and keep the rest as it is.",
        ]
    )
    return TaskParts(
        category="config-edit",
        instruction=instruction,
        inputs={src: before},
        solve=f"sed -i 's/\\b{old}\\b/{new}/g' {src}",
        check=_same(src, after),
        about=f"{src} with {old} replaced by {new}",
    )


def change_case(rng: random.Random) -> TaskParts:
    src = _file(rng)
    out = _out(rng, src)
    upper = rng.random() < 0.5
    lines = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 4))) for _ in range(3)]
    if not upper:
        lines = [ln.title() for ln in lines]
    text = "\n".join(lines) + "\n"
    result, case = (text.upper(), "upper") if upper else (text.lower(), "lower")
    instruction = rng.choice(
        [
            f"Save a copy of `{src}` with every letter in {case} case as `{out}`.",
            f"`{out}` should hold the text of `{src}` converted to {case}-case letters.",
        ]
    )
    solve = f"tr a-z A-Z < {src} > {out}" if upper else f"tr A-Z a-z < {src} > {out}"
    return TaskParts(
        category="text-processing",
        instruction=instruction,
        inputs={src: text},
        solve=solve,
        check=_same(out, result),
        about=f"{out} is {src} in {case} case",
    )


def sort_numbers(rng: random.Random) -> TaskParts:
    src = _file(rng)
    out = _out(rng, src)
    numbers = rng.sample(range(1, 500), rng.randint(5, 12))
    descending = rng.random() < 0.5
    ordered = sorted(numbers, reverse=descending)
    order = "largest first" if descending else "smallest first"
    instruction = rng.choice(
        [
            f"Sort the integers of `{src}` numerically, {order}, one per line, into `{out}`.",
            f"`{src}` has one number per line. Write them to `{out}` in numeric order, {order}.",
        ]
    )
    flags = "-nr" if descending else "-n"
    return TaskParts(
        category="data-transform",
        instruction=instruction,
        inputs={src: "\n".join(map(str, numbers)) + "\n"},
        solve=f"sort {flags} {src} > {out}",
        check=_same(out, "\n".join(map(str, ordered)) + "\n"),
        about=f"{out} is {src} sorted {order}",
    )


FAMILIES: dict[str, Callable[[random.Random], TaskParts]] = {
    "count-lines": count_lines,
    "line-count": line_count,
    "sum-numbers": sum_numbers,
    "config-value": config_value,
    "replace-word": replace_word,
    "change-case": change_case,
    "sort-numbers": sort_numbers,
}

#: The embedded splits' families (tasks/generated/pool, heldout): one per skill. line-count is
#: count-lines' plain form alone, for the learning demonstration's splits.
SKILL_FAMILIES: tuple[str, ...] = (
    "count-lines",
    "sum-numbers",
    "config-value",
    "replace-word",
    "change-case",
    "sort-numbers",
)
