"""The Dockerfile subset daemonless backends build: FROM, RUN, COPY, ADD (local), WORKDIR, ENV, ARG, USER.

Parsed with `dockerfile-parse`; anything else is a `BuildError` naming the line, so a proposer
learns at once what to change instead of getting a half-built image.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shlex
from pathlib import Path
from typing import Literal

from dockerfile_parse import DockerfileParser
from pydantic import BaseModel, Field

from autoenvscaling.tools.sandbox.base import BuildError

SUPPORTED = {"FROM", "RUN", "COPY", "ADD", "WORKDIR", "ENV", "ARG", "USER"}
# Metadata-only instructions: harmless to skip, but the build log says they were skipped.
IGNORED = {
    "LABEL",
    "EXPOSE",
    "CMD",
    "ENTRYPOINT",
    "MAINTAINER",
    "STOPSIGNAL",
    "SHELL",
    "VOLUME",
    "HEALTHCHECK",
}


class BuildStep(BaseModel):
    kind: Literal["RUN", "COPY", "WORKDIR", "USER"]
    line: int
    # RUN: the shell command. COPY: sources (relative to the context) and destination.
    command: str = ""
    sources: list[str] = Field(default_factory=list)
    dest: str = ""
    chown: str | None = None
    chmod: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="ENV in effect at this step")
    workdir: str = "/"
    user: str | None = None


class BuildPlan(BaseModel):
    base_image: str
    steps: list[BuildStep]
    env: dict[str, str]
    workdir: str
    user: str | None
    notes: list[str] = Field(default_factory=list)
    content_hash: str


_VAR = re.compile(r"\$(?:\{(\w+)(?::-([^}]*))?\}|(\w+))")


def _expand(text: str, values: dict[str, str]) -> str:
    def sub(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        default = match.group(2)
        return values.get(name, default if default is not None else "")

    return _VAR.sub(sub, text)


def _pairs(value: str, where: str) -> dict[str, str]:
    """`K=V K2="v 2"` or the legacy `K value with spaces` form of ENV / ARG."""
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise BuildError(f"{where}: cannot parse {value!r}: {exc}") from None
    if words and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    out: dict[str, str] = {}
    for word in words:
        key, sep, val = word.partition("=")
        if not sep:
            raise BuildError(f"{where}: expected KEY=VALUE, got {word!r}")
        out[key] = val
    return out


def _hash_context(context: Path, sources: list[str]) -> str:
    digest = hashlib.sha256()
    for source in sorted(set(sources)):
        root = context / source
        paths = sorted(root.rglob("*")) if root.is_dir() else [root]
        for path in paths:
            if path.is_file():
                digest.update(str(path.relative_to(context)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def parse_dockerfile(dockerfile: Path, context: Path | None = None) -> BuildPlan:
    """Parse and check a Dockerfile; the plan's hash covers it and every file it copies."""
    context = context or dockerfile.parent
    where = f"{dockerfile.name}"
    try:
        text = dockerfile.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise BuildError(f"{dockerfile}: cannot read: {exc}") from None
    parser = DockerfileParser(fileobj=io.BytesIO(text.encode()))
    args: dict[str, str] = {}
    env: dict[str, str] = {}
    workdir, user, base = "/", None, None
    steps: list[BuildStep] = []
    notes: list[str] = []
    copied: list[str] = []
    for item in parser.structure:
        kind, value, line = item["instruction"], item["value"], item["startline"] + 1
        at = f"{where} line {line} ({kind})"
        values = {**args, **env}
        if kind == "COMMENT":
            continue
        if kind in IGNORED:
            notes.append(f"{at}: ignored (metadata only)")
            continue
        if kind not in SUPPORTED:
            raise BuildError(
                f"{at}: instruction not supported by daemonless builds; "
                f"use only {', '.join(sorted(SUPPORTED))}"
            )
        if kind == "FROM":
            if base is not None:
                raise BuildError(f"{at}: multi-stage builds are not supported; use one FROM")
            words = value.split()
            if any(w.startswith("--") for w in words):
                raise BuildError(f"{at}: FROM flags such as --platform are not supported")
            base = _expand(words[0], args)
        elif base is None and kind != "ARG":
            raise BuildError(f"{at}: the first instruction must be FROM (or ARG before FROM)")
        elif kind == "ARG":
            for key, val in _pairs(value, at).items():
                args.setdefault(key, _expand(val, values))
        elif kind == "ENV":
            env.update({k: _expand(v, values) for k, v in _pairs(value, at).items()})
        elif kind == "WORKDIR":
            target = _expand(value.strip(), values)
            workdir = target if target.startswith("/") else str(Path(workdir) / target)
            steps.append(
                BuildStep(
                    kind="WORKDIR",
                    line=line,
                    dest=workdir,
                    env=dict(env),
                    workdir=workdir,
                    user=user,
                )
            )
        elif kind == "USER":
            user = _expand(value.strip(), values) or None
            steps.append(
                BuildStep(kind="USER", line=line, user=user, env=dict(env), workdir=workdir)
            )
        elif kind == "RUN":
            command = value.strip()
            if command.startswith("["):
                try:
                    command = shlex.join(json.loads(command))
                except (json.JSONDecodeError, TypeError):
                    raise BuildError(f"{at}: exec form is not a JSON list of strings") from None
            if command.startswith("--"):
                raise BuildError(f"{at}: RUN flags (--mount, --network) are not supported")
            steps.append(
                BuildStep(
                    kind="RUN",
                    line=line,
                    command=command,
                    env=dict(env),
                    workdir=workdir,
                    user=user,
                )
            )
        else:  # COPY / ADD
            words = shlex.split(_expand(value, values))
            flags = {w.split("=", 1)[0]: w.partition("=")[2] for w in words if w.startswith("--")}
            paths = [w for w in words if not w.startswith("--")]
            if unknown := set(flags) - {"--chown", "--chmod"}:
                raise BuildError(f"{at}: flag {sorted(unknown)[0]} is not supported")
            if len(paths) < 2:
                raise BuildError(f"{at}: needs at least one source and a destination")
            *sources, dest = paths
            for source in sources:
                if re.match(r"^[a-z]+://", source):
                    raise BuildError(f"{at}: remote sources ({source}) are not allowed: no network")
                resolved = (context / source).resolve()
                if not resolved.is_relative_to(context.resolve()):
                    raise BuildError(f"{at}: source {source} is outside the build context")
                if not any(context.glob(source)):
                    raise BuildError(f"{at}: source {source} not found in {context}")
            if not dest.startswith("/"):
                dest = str(Path(workdir) / dest) + ("/" if dest.endswith("/") else "")
            copied.extend(sources)
            steps.append(
                BuildStep(
                    kind="COPY",
                    line=line,
                    sources=sources,
                    dest=dest,
                    chown=flags.get("--chown"),
                    chmod=flags.get("--chmod"),
                    env=dict(env),
                    workdir=workdir,
                    user=user,
                )
            )
    if base is None:
        raise BuildError(f"{where}: no FROM instruction")
    digest = hashlib.sha256(text.encode())
    digest.update(_hash_context(context, copied).encode())
    return BuildPlan(
        base_image=base,
        steps=steps,
        env=env,
        workdir=workdir,
        user=user,
        notes=notes,
        content_hash=digest.hexdigest(),
    )
