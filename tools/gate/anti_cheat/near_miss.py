"""Near-miss outputs: wrong answers derived from the oracle's own final state.

The oracle's outputs (files it created or changed, measured by listing the image before and after
it ran, and named in the instruction) are perturbed in ways that keep them plausible: values
changed, a record dropped or duplicated, records reordered (only where the instruction fixes an
order), the right shape with placeholder values. Every variant is wrong, so a
verifier that still scores one of them >= the threshold does not check what the task asks for.

Pure functions over bytes: the probe agent (`probes.OracleAuditAgent`) applies each variant in the
trial's sandbox and runs the task's own tests on it.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, Field

#: Files that are programs, not data: perturbing one changes behaviour, not an answer.
CODE_SUFFIXES = frozenset(
    {
        ".sh", ".bash", ".py", ".pl", ".rb", ".js", ".ts", ".c", ".h", ".cc", ".cpp", ".hpp",
        ".go", ".rs", ".java", ".mk", ".sql", ".awk", ".sed", ".o", ".so", ".a", ".pyc",
    }
)  # fmt: skip
CODE_NAMES = frozenset({"Makefile", "makefile", "GNUmakefile", "Dockerfile"})
MAX_VARIANT_BYTES = 1_000_000
#: Near-miss kinds, most telling first: a verifier that checks any value fails `perturbed`; one
#: that checks every record fails `dropped`; `placeholder` is mostly covered by `perturbed`.
KINDS = ("perturbed", "dropped", "reordered", "duplicated", "placeholder")

# Words that mean the instruction fixes the order of records.
_ORDER_WORDS = re.compile(
    r"\b(sort(?:ed)?|order(?:ed)?|ascending|descending|rank(?:ed)?|first|oldest|newest|"
    r"chronological|reverse)\b",
    re.I,
)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_WORD = re.compile(r"[A-Za-z0-9]+")


class NearMiss(BaseModel):
    """One wrong answer: the files to write over the oracle's outputs."""

    kind: str = Field(description="perturbed | dropped | duplicated | reordered | placeholder | …")
    description: str = Field(description="What was changed, for the rejection reason.")
    files: dict[str, bytes] = Field(description="absolute path -> the wrong content")


def is_data_output(path: str, data: bytes) -> bool:
    """A text data file (not a program, not binary, not too big) worth perturbing."""
    pure = PurePosixPath(path)
    if pure.suffix.lower() in CODE_SUFFIXES or pure.name in CODE_NAMES or "/.git/" in path:
        return False
    if len(data) > MAX_VARIANT_BYTES or b"\0" in data[:8192]:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def fixes_order(instruction: str) -> bool:
    return bool(_ORDER_WORDS.search(instruction))


# --------------------------------------------------------------------------- JSON


def _leaves(value: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(value, dict):
        return {k: _leaves(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_leaves(v, fn) for v in value]
    return fn(value)


def _perturb_leaf(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return round(value * 1.5 + 1.0, 6)
    if isinstance(value, str):
        return value + "x" if value else "x"
    return value


def _placeholder_leaf(value: Any) -> Any:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return 0
    if isinstance(value, str):
        return ""
    return value


def _largest_list(value: Any) -> list[Any] | None:
    """The longest list in a JSON document (the records, usually)."""
    best: list[Any] | None = None
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            if best is None or len(node) > len(best):
                best = node
            stack.extend(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
    return best


def _json_variants(doc: Any, ordered: bool) -> dict[str, tuple[str, Any]]:
    out: dict[str, tuple[str, Any]] = {
        "perturbed": ("every value changed (numbers +1, strings suffixed)", _leaves(doc, _perturb_leaf)),
        "placeholder": ("the same shape with placeholder values (0, \"\", false)", _leaves(doc, _placeholder_leaf)),
    }  # fmt: skip
    target = _largest_list(doc)
    if target is not None and len(target) >= 2:
        dropped = copy.deepcopy(doc)
        lst = _largest_list(dropped)
        assert lst is not None
        lst.pop()
        out["dropped"] = ("the last record dropped", dropped)
        duplicated = copy.deepcopy(doc)
        lst = _largest_list(duplicated)
        assert lst is not None
        lst.append(copy.deepcopy(lst[0]))
        out["duplicated"] = ("the first record duplicated", duplicated)
        if ordered:
            reordered = copy.deepcopy(doc)
            lst = _largest_list(reordered)
            assert lst is not None
            lst.reverse()
            out["reordered"] = ("the records in reverse order", reordered)
    elif isinstance(doc, dict) and len(doc) >= 2:
        smaller = dict(doc)
        smaller.pop(next(reversed(doc)))
        out["dropped"] = ("the last key dropped", smaller)
    return out


def _dump_like(original: str, doc: Any) -> str:
    indent = 2 if "\n" in original.strip() else None
    text = json.dumps(doc, indent=indent, ensure_ascii=False)
    return text + ("\n" if original.endswith("\n") else "")


# --------------------------------------------------------------------------- text / CSV


def _perturb_line(line: str) -> str:
    if _NUMBER.search(line):
        return _NUMBER.sub(lambda m: _bump(m.group(0)), line)
    words = list(_WORD.finditer(line))
    if not words:
        return line
    last = words[-1]
    return line[: last.end()] + "x" + line[last.end() :]


def _bump(number: str) -> str:
    if "." in number:
        decimals = len(number.split(".")[1])
        return f"{float(number) + 1:.{decimals}f}"
    return str(int(number) + 1)


def _placeholder_line(line: str) -> str:
    return _WORD.sub(lambda m: "0" if m.group(0).isdigit() else "x", line)


def _has_header(lines: list[str]) -> bool:
    """A first line without digits over lines with digits: a header to keep in place."""
    return (
        len(lines) >= 2
        and not re.search(r"\d", lines[0])
        and any(re.search(r"\d", x) for x in lines[1:])
    )


def _text_variants(text: str, ordered: bool) -> dict[str, tuple[str, str]]:
    end = "\n" if text.endswith("\n") else ""
    lines = text.splitlines()
    head = 1 if _has_header(lines) else 0
    body = [i for i in range(head, len(lines)) if lines[i].strip()]
    out: dict[str, tuple[str, str]] = {}

    def join(new: list[str]) -> str:
        return "\n".join(new) + end

    out["perturbed"] = (
        "values changed on every line (numbers +1, else a letter appended)",
        join(lines[:head] + [_perturb_line(x) for x in lines[head:]]),
    )
    out["placeholder"] = (
        "the same shape with placeholder values (0 / x)",
        join(lines[:head] + [_placeholder_line(x) for x in lines[head:]]),
    )
    if len(body) >= 2:
        drop = body[-1]
        out["dropped"] = (f"line {drop + 1} dropped", join(lines[:drop] + lines[drop + 1 :]))
        first = body[0]
        out["duplicated"] = (
            f"line {first + 1} duplicated",
            join(lines[: first + 1] + [lines[first]] + lines[first + 1 :]),
        )
        if ordered:
            rows = [lines[i] for i in body]
            rev = list(lines)
            for i, row in zip(body, reversed(rows), strict=True):
                rev[i] = row
            out["reordered"] = ("the records in reverse order", join(rev))
    return out


# --------------------------------------------------------------------------- all together


def derive_near_misses(
    outputs: dict[str, bytes], instruction: str, *, max_variants: int = 4
) -> list[NearMiss]:
    """Wrong answers from the oracle's `outputs` (path -> content). Each variant applies one kind
    of change to every data output at once, so side files nobody checks cannot make it look right;
    variants equal to the oracle's answer are left out. The most telling kinds come first
    (`KINDS`); at most `max_variants` are returned (each costs one run of the tests)."""
    ordered = fixes_order(instruction)
    per_kind: dict[str, tuple[list[str], dict[str, bytes]]] = {}
    data = {p: b for p, b in sorted(outputs.items()) if is_data_output(p, b) and b.strip()}
    for path, content in data.items():
        text = content.decode("utf-8")
        variants: dict[str, tuple[str, str]]
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict | list):
            variants = {
                kind: (desc, _dump_like(text, new))
                for kind, (desc, new) in _json_variants(doc, ordered).items()
            }
        else:
            variants = _text_variants(text, ordered)
        for kind, (desc, new_text) in variants.items():
            new = new_text.encode("utf-8")
            if new == content:
                continue
            descs, files = per_kind.setdefault(kind, ([], {}))
            descs.append(f"{path}: {desc}")
            files[path] = new
    ranked = sorted(per_kind.items(), key=lambda item: KINDS.index(item[0]))
    return [
        NearMiss(kind=kind, description="; ".join(descs), files=files)
        for kind, (descs, files) in ranked
    ][:max_variants]
