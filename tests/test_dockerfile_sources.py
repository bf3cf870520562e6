"""ADD/COPY sources as the builder reads them (tools/tasks/dockerfile_sources.py): variables
expanded the way buildah 1.28 expands them, and every source whose value is not certain refused.
The real builds (a loopback canary that must see nothing) are tests/security/test_build_fetch.py.
"""

from __future__ import annotations

import time

import pytest

from autoenvscaling.tools.tasks.dockerfile import Dockerfile
from autoenvscaling.tools.tasks.dockerfile_sources import copy_sources, source_hazards

pytestmark = pytest.mark.timeout(60)


def resolved(text: str, inherited: frozenset[str] | None = frozenset()) -> list[str | None]:
    return [s.resolved for s in copy_sources(Dockerfile.parse("FROM debian\n" + text), inherited)]


def why(text: str, inherited: frozenset[str] | None = frozenset()) -> str:
    return copy_sources(Dockerfile.parse("FROM debian\n" + text), inherited)[0].why


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ARG S=data.txt\nCOPY $S /x\n", "data.txt"),
        ("ENV S data.txt\nCOPY ${S} /x\n", "data.txt"),  # ENV's legacy form
        ('ARG D="lib"\nENV S=${D}/a.py\nCOPY ["$S", "/x"]\n', "lib/a.py"),
        ("ARG S=\nCOPY ${S:-a.txt} ${S:+b} /x\n", "a.txt"),
        ("ENV S=env.txt\nARG S=arg.txt\nCOPY $S /x\n", "env.txt"),  # ENV wins over ARG
        ("ARG S=a\nENV S=b\nCOPY $S.txt /x\n", "b.txt"),
    ],
)
def test_variables_are_expanded_from_arg_defaults_and_env(text: str, expected: str):
    assert resolved(text)[0] == expected


def test_a_global_arg_reaches_a_stage_only_through_a_bare_arg():
    text = "ARG G=data\nFROM debian\nARG G\nCOPY ${G}.txt /x\nFROM debian\nCOPY ${G}.txt /y\n"
    assert [s.resolved for s in copy_sources(Dockerfile.parse(text))] == ["data.txt", None]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("COPY $NOPE /x\n", "no value in this Dockerfile"),
        ("ARG S\nCOPY $S /x\n", "no value"),
        ("COPY ${NOPE:-a.txt} /x\n", "no value"),  # the base image may set NOPE
        ("ARG TARGETARCH=amd64\nCOPY bin-$TARGETARCH /x\n", "builder's own flags"),
        ("ARG S='$T'\nCOPY $S /x\n", "quotes or backslashes"),
        ('ARG S="a b"\nCOPY $S /x\n', "not one path"),
        ("ARG S=a\nCOPY ${S#a} /x\n", "does not expand"),
        ("COPY $$S /x\n", "does not expand"),
        ("ARG S=safe\nARG S=http://h/x T=$S\nADD $T /x\n", "same line"),
        ('ARG S="open\nCOPY $S /x\n', "cannot split"),
    ],
)
def test_a_source_whose_value_is_not_certain_is_refused(text: str, reason: str):
    assert resolved(text) == [None] and reason in why(text)


def test_the_base_images_env_wins_over_an_arg_so_such_a_name_is_refused():
    text = "ARG S=data.txt\nCOPY $S /x\n"
    assert resolved(text) == ["data.txt"]  # lint: the base image's ENV is not known
    assert resolved(text, frozenset({"S"})) == [None]  # the build: the engine says it sets S
    assert "base image may set it" in why(text, frozenset({"S"}))
    assert resolved(text, None) == [None]  # the base image is not in the engine yet
    assert resolved("ENV S=data.txt\nCOPY $S /x\n", frozenset({"S"})) == ["data.txt"]


@pytest.mark.parametrize(
    "text",
    [
        "ARG SRC=http://127.0.0.1:9/x\nADD ${SRC} /x\n",
        "ENV SRC=https://10.0.0.1/x\nADD $SRC /x\n",
        "ARG P=http\nADD ${P}://127.0.0.1:9/x /x\n",
        'ARG S="ftp://h/x"\nADD ["$S", "/x"]\n',
        "ADD git@github.com:o/r.git /x\n",
        "COPY http://127.0.0.1:9/x /x\n",
    ],
)
def test_remote_sources_are_hazards_whatever_hides_them(text: str):
    hazards = source_hazards("FROM debian\n" + text)
    assert [h.rule for h in hazards] == ["dockerfile-remote-add"], hazards
    assert "RUN step" in hazards[0].message and "host's network" in hazards[0].message


def test_plain_sources_are_no_hazard_and_long_lines_are_read_in_linear_time():
    assert source_hazards("FROM debian\nCOPY a.txt /x\nADD ./dir /y\n") == []
    started = time.monotonic()
    source_hazards("FROM debian\nARG " + "a'" * 300_000 + "\nENV " + "b=c " * 100_000 + "\n")
    assert time.monotonic() - started < 5
