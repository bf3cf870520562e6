"""Build-time fetch: no Dockerfile makes the builder fetch a URL from the host's network (issue 42).

The builder fetches an ADD URL itself, on the host's network, outside the build's `--network
none` (or the user-mode network of a task granted the internet). A URL hidden in a variable
(`ARG SRC=http://127.0.0.1:PORT/x` + `ADD ${SRC} /x`, or ENV, or a base image's ENV that wins over
an ARG) passed lint and reached the builder, which fetched it from the host's loopback. Each
attack here is a real task whose URL points at a canary listener on 127.0.0.1; the gate (lint,
then its build stage, on the default engine) must reject the task with a reason that names the
remote source, and the canary must see no connection at all.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoenvscaling.tools.gate import GateConfig, run_stage, validate_task
from autoenvscaling.tools.gate.config import STAGES
from autoenvscaling.tools.gate.lint import lint_task
from tests.security.conftest import BACKEND, build_image, write_task

pytestmark = [pytest.mark.timeout(300)]

BASE = "docker.io/library/debian:bookworm-slim"


class Canary:
    """A listener on 127.0.0.1 that records every connection (its first bytes) and answers 200;
    it stops by itself after `seconds`, so a hung test leaves nothing listening."""

    def __init__(self, seconds: float = 240) -> None:
        self.hits: list[bytes] = []
        self._stop = threading.Event()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._deadline = time.monotonic() + seconds
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with self._server:
            while not self._stop.is_set() and time.monotonic() < self._deadline:
                try:
                    conn, _ = self._server.accept()
                except TimeoutError:
                    continue
                with conn:
                    conn.settimeout(2)
                    try:
                        self.hits.append(conn.recv(4096) or b"<connected>")
                        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\ncanary")
                    except OSError:
                        self.hits.append(b"<connected>")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.fixture
def canary() -> Iterator[Canary]:
    listener = Canary()
    yield listener
    listener.close()


# Each: the Dockerfile's lines after FROM, given the canary's URL.
ATTACKS = {
    "arg": lambda url: f"ARG SRC={url}\nADD ${{SRC}} /x\n",
    "env": lambda url: f"ENV SRC={url}\nADD $SRC /x\n",
    "json": lambda url: f'ARG SRC="{url}"\nADD ["${{SRC}}", "/x"]\n',
    "joined": lambda url: (
        f"ARG SCHEME={url.split(':')[0]}\nENV REST={url.split(':', 1)[1]}\nADD ${{SCHEME}}:$REST /x\n"
    ),
}


def _task(root: Path, name: str, dockerfile: str, *, internet: bool = False) -> Path:
    task = write_task(
        root,
        name,
        dockerfile=dockerfile,
        test_sh="#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n",
        solve="#!/bin/bash\ntrue\n",
    )
    if internet:  # the task declares the internet (the gate must also grant it)
        toml = task / "task.toml"
        toml.write_text(toml.read_text().replace('"no-network"', '"public"'))
    return task


def _build_stage(task: Path, config: GateConfig):
    return asyncio.run(run_stage("build", task, config))


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_url_in_a_variable_is_never_fetched(
    engine_ready, tmp_path: Path, canary: Canary, attack: str
):
    url = f"http://127.0.0.1:{canary.port}/{attack}"
    task = _task(tmp_path, f"fetch-{attack}", f"FROM {BASE}\n" + ATTACKS[attack](url))
    config = GateConfig(backend=BACKEND)

    # The gate, then its build stage alone (as if lint had been passed).
    verdict = asyncio.run(validate_task(task, config, skip=STAGES[STAGES.index("build") + 1 :]))
    build = _build_stage(task, config)
    assert canary.hits == [], f"{attack}: the build fetched from the host's loopback: {canary.hits}"

    # Lint rejects it, naming the source and its value; the build refuses before the builder runs.
    assert not verdict.admitted and verdict.stage == "lint", verdict.reason
    found = [f for f in lint_task(task).errors if f.rule == "dockerfile-remote-add"]
    assert found and url in found[0].message and "RUN step" in found[0].message, found
    assert not build.passed and "refused to build" in build.reason, build.reason
    assert "fetches a remote source itself" in build.reason and url in build.reason, build.reason
    shutil.rmtree(task, ignore_errors=True)


def test_a_task_granted_the_internet_still_downloads_in_run_steps(
    engine_ready, tmp_path: Path, canary: Canary
):
    """The builder's own fetch does not go through the network a granted task's RUN steps get,
    so a remote ADD is refused there too, with the way to do it instead."""
    url = f"http://127.0.0.1:{canary.port}/granted"
    task = _task(tmp_path, "fetch-granted", f"FROM {BASE}\nADD {url} /x\n", internet=True)
    build = _build_stage(task, GateConfig(backend=BACKEND, allow_internet=True))
    assert canary.hits == [], f"the build fetched from the host's loopback: {canary.hits}"
    assert not build.passed and "not even for a task granted the internet" in build.reason
    assert "download it in a RUN step" in build.reason, build.reason


def test_a_base_images_env_does_not_hide_a_url_behind_an_arg(
    engine_ready, tmp_path: Path, canary: Canary
):
    """buildah takes the base image's ENV over an ARG of the same name: `ARG SRC=data.txt` reads
    as a local file, and the builder fetched the base image's URL. Lint cannot know the base
    image's ENV; the build asks the engine and refuses."""
    url = f"http://127.0.0.1:{canary.port}/base"
    base = build_image("fetch-base-env", f"FROM {BASE}\nENV SRC={url}\n")
    try:
        task = _task(tmp_path, "fetch-base-env", f"FROM {base}\nARG SRC=data.txt\nADD $SRC /x\n")
        (task / "environment" / "data.txt").write_text("local\n")
        build = _build_stage(task, GateConfig(backend=BACKEND))
    finally:
        from autoenvscaling.tools.sandbox.engine import client

        client(BACKEND).api.remove_image(base, force=True)
    assert canary.hits == [], f"the build fetched from the host's loopback: {canary.hits}"
    assert not build.passed and "refused to build" in build.reason, build.reason
    assert "the base image may set it" in build.reason, build.reason


def test_a_from_image_is_never_pulled_from_the_hosts_loopback(
    engine_ready, tmp_path: Path, canary: Canary
):
    """The builder pulls a missing FROM image itself, on the host's network: a registry at
    127.0.0.1 got the builder's TLS hello (three tries) before. Only public registries may be
    pulled from; the canary sees nothing."""
    image = f"127.0.0.1:{canary.port}/evil/base:latest"
    task = _task(tmp_path, "fetch-from", f"FROM {image}\nRUN true\n")
    build = _build_stage(task, GateConfig(backend=BACKEND))
    assert canary.hits == [], f"the builder connected to the host's loopback: {canary.hits[:1]}"
    assert not build.passed and "refused to build" in build.reason, build.reason
    assert f"FROM {image}" in build.reason and "host's network" in build.reason, build.reason
