"""The one Dockerfile reader: instructions, stages, base images, WORKDIR and COPY sources.

A task's Dockerfile is written by a model, so it is hostile input: reading or parsing it raises
`DockerfileError` and nothing else (dockerfile-parse is lenient but not total). Callers decide
what an unreadable Dockerfile means for them (lint: a finding; the verifier: the default workdir).
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import shlex
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dockerfile_parse import DockerfileParser
from dockerfile_parse.parser import image_from
from pydantic import BaseModel

#: Larger files are refused before parsing (task limits allow far less anyway).
MAX_DOCKERFILE_BYTES = 1_000_000

# A heredoc opener `<<EOF` / `<<-'EOF'` outside quotes; group 3 is its terminator word.
_HEREDOC = re.compile(r"""("(?:\\.|[^"\\])*"|'[^']*')|<<-?\s*(['"]?)(\w+)\2""")


# A parser directive line (`# syntax=...`, `# escape=...`, `# check=...`): readers disagree on
# which they honour (buildah 1.28 stops at the first it does not know; dockerfile-parse keeps
# looking), and the escape character decides where every instruction ends.
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*([A-Za-z][\w-]*)[ \t]*=")
_KNOWN_DIRECTIVES = frozenset({"syntax", "escape", "check"})
# RUN --mount anywhere in the text (CVE-2024-1753: a bind `from=` a stage whose source is a link
# to / mounts the host's root read-write); no plain command needs the literal word.
_MOUNT = re.compile(r"--[ \t]*mount\b", re.IGNORECASE)
# The flags of a RUN/COPY/ADD (the words before its command): --network, --security, --from
# reach past the build step.
_INSTRUCTION_FLAGS = re.compile(r"^[ \t]*(?:RUN|COPY|ADD)((?:[ \t]+--\S+)+)", re.I | re.M)
_REACHING = re.compile(r"--(network|security|from|mount)\b", re.IGNORECASE)
# A heredoc opener (`<<EOF`, `<<-'EOF'`): buildah 1.28 reads its body lines as instructions, our
# reader skips them. A terminator starts with a letter, so `$((1<<3))` is no heredoc.
_HEREDOC_OPENER = re.compile(r"<<-?[ \t]*(['\"]?)[A-Za-z_]\w*\1")


class Hazard(BaseModel):
    """Something in a Dockerfile's text that the builder may read differently from us, or that
    reaches past the build step; `rule` is its lint rule."""

    rule: str
    line: int
    message: str


def build_hazards(text: str) -> list[Hazard]:
    """What the builder must never see, read from the raw text, not through our parser.

    Escape-agnostic on purpose: a flag counts if it appears in the text as written, or once the
    lines are joined with either escape character (`\\` or a backtick) and comment lines are
    dropped, so no choice of escape, continuation or directive hides it from this check.
    """
    lines = text.splitlines()
    found: list[Hazard] = []
    for number, line in enumerate(lines, 1):
        match = _DIRECTIVE.match(line)
        if match and match[1].lower() in _KNOWN_DIRECTIVES:
            found.append(
                Hazard(
                    rule="dockerfile-parser-directive",
                    line=number,
                    message=f"`{line.strip()}`: parser directives (syntax, escape, check) are "
                    "not supported: builders disagree on which they honour, and so on where "
                    "each instruction ends; remove the line",
                )
            )
    for number, line in enumerate(lines, 1):
        if not line.lstrip().startswith("#") and _HEREDOC_OPENER.search(line):
            found.append(
                Hazard(
                    rule="dockerfile-heredoc",
                    line=number,
                    message="a heredoc (<<): this builder reads its body lines as instructions; "
                    "put the script in a file of environment/, COPY it and RUN it",
                )
            )
            break
    kept = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    joined = [re.sub(rf"{esc}[ \t]*\n(?:[ \t]*\n)*", "", kept) for esc in (r"\\", "`")]
    flags = {m[0].lower() for v in (text, *joined) for m in _MOUNT.finditer(v)}
    for variant in (text, *joined):
        for match in _INSTRUCTION_FLAGS.finditer(variant):
            flags |= {f"--{m[1].lower()}" for m in _REACHING.finditer(match[1])}
    for flag in sorted({f.replace(" ", "").replace("\t", "") for f in flags}):
        line = next((n for n, ln in enumerate(lines, 1) if _flag_at(flag, ln)), 1)
        found.append(
            Hazard(
                rule="dockerfile-flags",
                line=line,
                message=f"{flag} is not supported: RUN --mount/--network/--security and "
                "COPY/ADD --from reach past the build step (a bind mount from another stage can "
                "reach the host); copy files of environment/ and RUN plain commands",
            )
        )
    return found


def _flag_at(flag: str, line: str) -> bool:
    return re.search(rf"--[ \t]*{flag[2:]}\b", line, re.IGNORECASE) is not None


class DockerfileError(ValueError):
    """The Dockerfile cannot be read or parsed; the message says why."""


class Instruction(BaseModel):
    name: str
    line: int
    value: str
    heredoc: bool = False


class Dockerfile(BaseModel):
    """A parsed Dockerfile: its instructions in order (comments and heredoc bodies left out)."""

    instructions: list[Instruction]
    parents: list[str]
    stages: list[str]

    @classmethod
    def parse(cls, text: str) -> Dockerfile:
        try:
            # dockerfile-parse reads bytes from `fileobj` (its annotation says IO[str]).
            parser = DockerfileParser(fileobj=io.BytesIO(text.encode("utf-8")))  # pyright: ignore[reportArgumentType]
            structure = parser.structure
            parents = list(parser.parent_images)
            stages = []
            for item in structure:
                if item["instruction"] == "FROM":
                    _, stage = image_from(item["value"])
                    if stage:
                        stages.append(stage)
            instructions = _instructions(structure)
        except Exception as exc:  # noqa: BLE001 - a lenient parser on hostile text: one typed error
            raise DockerfileError(f"cannot parse the Dockerfile: {exc}") from None
        return cls(instructions=instructions, parents=parents, stages=stages)

    @classmethod
    def read(cls, path: Path) -> Dockerfile:
        """Parse the file at `path`: a regular file of at most MAX_DOCKERFILE_BYTES, UTF-8."""
        try:
            info = path.lstat()  # a FIFO would block the read, a link may point anywhere
            if not stat.S_ISREG(info.st_mode):
                raise DockerfileError(f"{path} is not a regular file")
            if info.st_size > MAX_DOCKERFILE_BYTES:
                raise DockerfileError(
                    f"{path} is {info.st_size} bytes; a Dockerfile may have at most "
                    f"{MAX_DOCKERFILE_BYTES}"
                )
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DockerfileError(f"cannot read {path}: {exc}") from None
        return cls.parse(text)

    def named(self, name: str) -> list[Instruction]:
        return [ins for ins in self.instructions if ins.name == name]

    def base_images(self) -> list[str]:
        """The images the build pulls: FROM images that are neither an earlier stage nor scratch."""
        stages = {s.lower() for s in self.stages}
        return [p for p in self.parents if p.lower() not in stages and p != "scratch"]

    def workdir(self) -> str | None:
        """The final WORKDIR (relative ones join the previous, as the builder does); None if unset."""
        workdir: str | None = None
        for ins in self.named("WORKDIR"):
            value = ins.value.strip().strip("\"'")
            if value:
                workdir = posixpath.join(workdir or "/", value)
        return posixpath.normpath(workdir) if workdir is not None else None


def copy_args(value: str) -> tuple[list[str], list[str]]:
    """COPY/ADD value -> (flags, sources); the destination is dropped."""
    value = value.strip()
    try:
        args = json.loads(value) if value.startswith("[") else shlex.split(value)
    except (ValueError, RecursionError):
        args = value.split()
    if not isinstance(args, list):
        args = value.split()
    args = [str(a) for a in args]
    flags = [a for a in args if a.startswith("--")]
    rest = [a for a in args if not a.startswith("--")]
    return flags, rest[:-1]


def _instructions(structure: Sequence[Mapping[str, Any]]) -> list[Instruction]:
    """Instructions in order, heredoc bodies skipped (dockerfile-parse reads them as lines)."""
    out: list[Instruction] = []
    pending: list[str] = []
    for item in structure:
        if pending:
            if item["content"].strip() == pending[0]:
                pending.pop(0)
            continue
        if item["instruction"] == "COMMENT":
            continue
        pending = [m[3] for m in _HEREDOC.finditer(item["content"]) if m[3]]
        out.append(
            Instruction(
                name=item["instruction"].upper(),
                line=item["startline"] + 1,
                value=item["value"],
                heredoc=bool(pending),
            )
        )
    return out
