"""Build escape: no Dockerfile reaches the host through the image build (issue 28, item 1).

Debian bookworm's podman 4.3 / buildah 1.28 has CVE-2024-1753: `RUN --mount=type=bind,
from=<stage>,source=<link to />,rw` binds the host's `/` read-write into the build step. Each
Dockerfile below is a real build on the default engine that, if the builder ran it, creates a
file in a folder this test owns (a pytest temp folder, mode 0700, nothing else). The defence:
the builder is never handed such a Dockerfile (tools/sandbox/images.py `refuse_hazards`), lint
says why before any build (`dockerfile-parser-directive`, `dockerfile-flags`), and should one
reach the builder anyway, the build runs where the host is read-only (tools/sandbox/buildjail.py).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from autoenvscaling.tools.gate.lint import lint_task
from autoenvscaling.tools.sandbox import images
from autoenvscaling.tools.sandbox.base import BuildError
from autoenvscaling.tools.sandbox.images import build_image
from tests.security.conftest import BACKEND, write_task

pytestmark = [pytest.mark.timeout(300)]

BASE = "docker.io/library/debian:bookworm-slim"


def _plain(target: Path) -> str:
    return (
        f"FROM {BASE} AS links\n"
        "RUN ln -s / /tmp/hostroot\n"
        f"FROM {BASE}\n"
        "RUN --mount=type=bind,from=links,source=/tmp/hostroot,target=/h,rw "
        f"touch /h{target}\n"
    )


def _directives(target: Path) -> str:
    # buildah stops reading directives at `syntax` and keeps `\` as the escape; a reader that
    # honours `escape` joins the rest into one harmless RUN and sees neither stage nor mount.
    return (
        "# syntax=docker/dockerfile:1\n"
        "# escape=`\n"
        f"FROM {BASE} AS links\n"
        "RUN ln -s / /tmp/hostroot # `\n"
        f"FROM {BASE} AS `\n"
        "RUN --mount=type=bind,from=links,source=/tmp/hostroot,target=/h,rw "
        f"touch /h{target}\n"
    )


def _split_flag(target: Path) -> str:
    # The flag's word split by a continuation and a comment line: only a joined read sees it.
    return (
        f"FROM {BASE} AS links\n"
        "RUN ln -s / /tmp/hostroot\n"
        f"FROM {BASE}\n"
        "RUN --mo\\\n"
        "# a comment line inside the continuation\n"
        f"unt=type=bind,from=links,source=/tmp/hostroot,target=/h,rw touch /h{target}\n"
    )


def _heredoc(target: Path) -> str:
    # buildah 1.28 reads a heredoc's body as instructions; a reader that skips bodies sees none.
    return (
        f"FROM {BASE} AS links\n"
        "RUN ln -s / /tmp/hostroot\n"
        "RUN cat <<NOTES\n"
        f"FROM {BASE}\n"
        "RUN --mount=type=bind,from=links,source=/tmp/hostroot,target=/h,rw "
        f"touch /h{target}\n"
        "NOTES\n"
    )


ATTACKS = {
    "plain": _plain,
    "directives": _directives,
    "split-flag": _split_flag,
    "heredoc": _heredoc,
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_build_cannot_write_the_host(engine_ready, tmp_path: Path, attack: str):
    owned = tmp_path / "owned"
    owned.mkdir(mode=0o700)
    target = owned / f"escaped-{attack}"
    task = write_task(
        tmp_path,
        f"build-escape-{attack}",
        dockerfile=ATTACKS[attack](target),
        test_sh="#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n",
        solve="#!/bin/bash\ntrue\n",
    )
    built = None
    refused: BuildError | None = None
    try:
        built = asyncio.run(
            build_image(
                task / "environment",
                backend=BACKEND,
                task_name=f"security-build-{attack}",
                force=True,
                timeout_sec=240,
            )
        )
    except BuildError as exc:
        refused = exc
    finally:
        if built is not None:  # the attack built: drop its image
            from autoenvscaling.tools.sandbox.engine import client

            client(BACKEND).api.remove_image(built.tag, force=True)
    wrote = target.exists()
    target.unlink(missing_ok=True)
    assert not wrote, f"{attack}: the image build wrote {target} on the host"
    assert refused is not None and "refused to build" in str(refused), (
        f"{attack}: the builder was handed the Dockerfile ({refused or 'it built'})"
    )
    rules = {f.rule for f in lint_task(task).errors}
    assert rules & {"dockerfile-flags", "dockerfile-parser-directive", "dockerfile-heredoc"}, (
        f"{attack}: lint passed the Dockerfile ({sorted(rules)})"
    )
    if attack == "directives":
        assert "dockerfile-parser-directive" in rules
    shutil.rmtree(task, ignore_errors=True)


def test_a_build_that_reaches_the_host_finds_it_read_only(
    engine_ready, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Defence in depth: with the text check switched off, the CVE's bind of / reaches the
    builder, and the write still fails."""
    monkeypatch.setattr(images, "refuse_hazards", lambda *_args: None)
    owned = tmp_path / "owned"
    owned.mkdir(mode=0o700)
    target = owned / "escaped-past-the-reader"
    context = tmp_path / "environment"
    context.mkdir()
    (context / "Dockerfile").write_text(_plain(target))
    built = None
    try:
        built = asyncio.run(
            build_image(context, backend=BACKEND, task_name="security-build-jail", force=True)
        )
    except BuildError as exc:
        assert "Read-only file system" in str(exc), exc
    finally:
        if built is not None:
            from autoenvscaling.tools.sandbox.engine import client

            client(BACKEND).api.remove_image(built.tag, force=True)
    wrote = target.exists()
    target.unlink(missing_ok=True)
    assert not wrote, f"the build wrote {target} on the host"
