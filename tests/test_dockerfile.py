"""The one Dockerfile reader (tools/tasks/dockerfile.py): what lint, the image builder and the verifier
read from a Dockerfile, and its only failure on hostile text or files: `DockerfileError`."""

from __future__ import annotations

import os
import random
import string

import pytest

from autoenvscaling.tools.sandbox.images import _parent_images
from autoenvscaling.tools.tasks.dockerfile import (
    MAX_DOCKERFILE_BYTES,
    Dockerfile,
    DockerfileError,
    copy_args,
)
from autoenvscaling.tools.trials.verifier import DEFAULT_WORKDIR, _dockerfile_workdir

pytestmark = pytest.mark.timeout(60)

MULTI = """\
ARG BASE=python:3.12-slim
# a comment
FROM ${BASE} AS build
RUN <<EOF
WORKDIR /not-an-instruction
EOF
FROM build
COPY --chown=1:1 a.txt "b c.txt" /app/
FROM scratch
WORKDIR /srv
WORKDIR data/../out
"""


def test_instructions_stages_and_base_images() -> None:
    df = Dockerfile.parse(MULTI)
    assert [(i.name, i.line) for i in df.instructions] == [
        ("ARG", 1),
        ("FROM", 3),
        ("RUN", 4),  # the heredoc body is not read as instructions
        ("FROM", 7),
        ("COPY", 8),
        ("FROM", 9),
        ("WORKDIR", 10),
        ("WORKDIR", 11),
    ]
    assert df.named("RUN")[0].heredoc and not df.named("COPY")[0].heredoc
    assert df.stages == ["build"]
    # ARG substituted; an earlier stage and scratch are not images to pull.
    assert df.base_images() == ["python:3.12-slim"]
    assert df.workdir() == "/srv/out"
    assert Dockerfile.parse("FROM debian\n").workdir() is None


def test_copy_args() -> None:
    assert copy_args('--chown=1:1 a.txt "b c.txt" /app/') == (["--chown=1:1"], ["a.txt", "b c.txt"])
    assert copy_args('["x", "y", "/dst"]') == ([], ["x", "y"])
    assert copy_args("[1, 2, 3]") == ([], ["1", "2"])  # JSON, but not strings
    assert copy_args("'unbalanced /dst") == ([], ["'unbalanced"])
    assert copy_args("[" * 100_000) == ([], [])  # too deep for json: read as words


def test_callers_share_the_reader(tmp_path) -> None:
    env = tmp_path / "task" / "environment"
    env.mkdir(parents=True)
    (env / "Dockerfile").write_text(MULTI)
    assert _parent_images(env / "Dockerfile") == ["python:3.12-slim"]
    assert _dockerfile_workdir(tmp_path / "task") == "/srv/out"
    (env / "Dockerfile").write_text("FROM debian\nRUN true\n")
    assert _dockerfile_workdir(tmp_path / "task") == DEFAULT_WORKDIR
    (env / "Dockerfile").write_bytes(b"FROM debian\nWORKDIR /\xff\n")
    assert _dockerfile_workdir(tmp_path / "task") == DEFAULT_WORKDIR
    assert _parent_images(env / "Dockerfile") == []


def test_hostile_files_are_a_typed_error(tmp_path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # reading it would block forever
    link = tmp_path / "link"
    link.symlink_to("/etc/passwd")
    big = tmp_path / "big"
    big.write_text("RUN true\n" * (MAX_DOCKERFILE_BYTES // 9 + 1))
    binary = tmp_path / "binary"
    binary.write_bytes(b"FROM \xff\xfe\n")
    for path, words in (
        (fifo, "not a regular file"),
        (link, "not a regular file"),
        (big, "at most"),
        (binary, "cannot read"),
        (tmp_path / "missing", "cannot read"),
        (tmp_path, "not a regular file"),
    ):
        with pytest.raises(DockerfileError, match=words):
            Dockerfile.read(path)


def test_hostile_text_never_raises_anything_else() -> None:
    """Fuzz: fragments of Dockerfile syntax, quotes, continuations, heredocs and junk."""
    pieces = [
        "FROM ", "AS ", "ARG ", "WORKDIR ", "COPY ", "RUN ", "ENV ", "${", "$", "}", '"', "'",
        "\\\n", "\n", "<<", "EOF", "[", "]", "--platform=", "#", " ", "\t", "\x00", "é", "=",
    ]  # fmt: skip
    rng = random.Random(19)
    for _ in range(3000):
        text = "".join(
            rng.choice(pieces) if rng.random() < 0.8 else rng.choice(string.printable)
            for _ in range(rng.randint(1, 40))
        )
        try:
            df = Dockerfile.parse(text)
        except DockerfileError:
            continue
        df.base_images(), df.workdir()
        for ins in df.named("COPY"):
            copy_args(ins.value)
