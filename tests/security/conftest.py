"""The red-team suite's set-up: the default engine (a failure to start it FAILS the suite), attack
task folders, and trials run concurrently so the whole suite stays short.

Every attack is a real Harbor task whose `solution/solve.sh` (run by Harbor's oracle agent) or
`environment/Dockerfile` IS the attack; the verdict is read from Harbor's own trial result.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoenvscaling.tools.trials import ENVIRONMENTS, TrialOutcome, run_trial
from tests.security.naive_env import IMPORT_PATH as NAIVE_IMPORT_PATH

#: The backend the project runs trials on by default (tools/trials.py).
BACKEND = "docker"
#: The controls' environment: a shared verifier that does not end the agent's processes.
NAIVE = "naive-shared"
ENVIRONMENTS.setdefault(NAIVE, {"import_path": NAIVE_IMPORT_PATH})
#: Trials in flight at once (each separate-verifier trial runs two containers).
CONCURRENCY = 4
PODMAN_CONF = """\
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
init_path = "/usr/bin/catatonit"

[engine]
runtime = "runc"
"""


def _engine_answers() -> str | None:
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception as exc:  # noqa: BLE001 - the reason is reported if nothing else works
        return str(exc)
    return None


@pytest.fixture(scope="session")
def engine() -> Iterator[None]:
    """A container engine with the seed bases. Without DOCKER_HOST, a podman API service of
    our own (the project's default engine). Any failure here fails the suite: never a skip."""
    started: subprocess.Popen[bytes] | None = None
    state: Path | None = None
    previous = os.environ.get("DOCKER_HOST")
    if _engine_answers() is not None:
        podman = shutil.which("podman")
        if podman is None:
            pytest.fail("the default engine (podman) is not installed: run `make setup`")
        state = Path(tempfile.mkdtemp(prefix="aes-security-podman-"))
        (state / "containers.conf").write_text(PODMAN_CONF)
        sock = state / "podman.sock"
        started = subprocess.Popen(
            [podman, "system", "service", "--time=0", f"unix://{sock}"],
            env={**os.environ, "CONTAINERS_CONF": str(state / "containers.conf")},
            stdout=subprocess.DEVNULL,
            stderr=open(state / "service.log", "wb"),  # noqa: SIM115 - lives with the service
        )
        os.environ["DOCKER_HOST"] = f"unix://{sock}"
        deadline = time.monotonic() + 30
        while (why := _engine_answers()) is not None:
            if started.poll() is not None or time.monotonic() > deadline:
                log = (state / "service.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"podman's API service did not start: {why}\n{log}")
            time.sleep(0.3)
    try:
        from autoenvscaling.tools.sandbox.docker import SEED_BASE_TAGS, client, ensure_base_image

        present = {t for i in client().api.images() for t in i.get("RepoTags") or []}
        if not any(t.endswith("debian:bookworm-slim") for t in present):
            ensure_base_image(SEED_BASE_TAGS)  # once per machine: the debootstrap base, imported
        yield
    finally:
        if started is not None:
            started.terminate()
            try:
                started.wait(10)
            except subprocess.TimeoutExpired:
                started.kill()
            if previous is None:
                os.environ.pop("DOCKER_HOST", None)
            else:
                os.environ["DOCKER_HOST"] = previous
            if state is not None:
                shutil.rmtree(state, ignore_errors=True)


def build_image(name: str, dockerfile: str, files: dict[str, str] | None = None) -> str:
    """Build one image for a family of attack tasks (they name it as `docker_image`)."""
    from autoenvscaling.tools.sandbox.docker import build_image as build

    context = Path(tempfile.mkdtemp(prefix=f"aes-security-{name}-")) / "environment"
    context.mkdir()
    (context / "Dockerfile").write_text(dockerfile)
    for rel, text in (files or {}).items():
        (context / rel).write_text(text)
    try:
        image = asyncio.run(build(context, task_name=f"security-{name}", timeout_sec=300))
    finally:
        shutil.rmtree(context.parent, ignore_errors=True)
    return image.tag


def write_task(
    root: Path,
    name: str,
    *,
    solve: str,
    test_sh: str,
    tests: dict[str, str] | None = None,
    mode: str = "separate",
    image: str | None = None,
    dockerfile: str | None = None,
    environment_files: dict[str, str] | None = None,
    cpus: float = 1,
    memory_mb: int = 512,
    instruction: str = "Do the task.\n",
) -> Path:
    """A Harbor task folder: `solve` is the oracle's script, i.e. the attack."""
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    image_line = f'docker_image = "{image}"\n' if image else ""
    (task / "task.toml").write_text(
        'schema_version = "1.4"\nartifacts = ["/app"]\n\n'
        "[agent]\ntimeout_sec = 120\n\n"
        f'[verifier]\nenvironment_mode = "{mode}"\ntimeout_sec = 60\n\n'
        f'[environment]\n{image_line}network_mode = "no-network"\ncpus = {cpus}\n'
        f"memory_mb = {memory_mb}\nbuild_timeout_sec = 300\n"
    )
    (task / "instruction.md").write_text(instruction)
    if dockerfile is not None:
        (task / "environment" / "Dockerfile").write_text(dockerfile)
    else:
        (task / "environment" / ".keep").write_text("")
    for rel, text in (environment_files or {}).items():
        (task / "environment" / rel).write_text(text)
    for path, text in (("tests/test.sh", test_sh), ("solution/solve.sh", solve)):
        (task / path).write_text(textwrap.dedent(text).lstrip())
        (task / path).chmod(0o755)
    for rel, text in (tests or {}).items():
        (task / "tests" / rel).write_text(textwrap.dedent(text).lstrip())
    return task


def run_all(trials: dict[str, tuple[Path, str]], trials_dir: Path) -> dict[str, TrialOutcome]:
    """Run {key: (task, backend)} as oracle trials, CONCURRENCY at a time; outcomes by key."""

    async def main() -> dict[str, TrialOutcome]:
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(key: str, task: Path, backend: str) -> tuple[str, TrialOutcome]:
            async with gate:
                outcome = await run_trial(
                    task, agent="oracle", backend=backend, trials_dir=trials_dir / key
                )
            return key, outcome

        done = await asyncio.gather(*(one(k, t, b) for k, (t, b) in trials.items()))
        return dict(done)

    return asyncio.run(main())


def agent_log(outcome: TrialOutcome) -> str:
    """What the oracle agent (the attack script) printed, from Harbor's trial folder."""
    if not outcome.trial_dir:
        return ""
    path = Path(outcome.trial_dir) / "agent" / "oracle.txt"
    return path.read_text(errors="replace") if path.exists() else ""


def describe(outcome: TrialOutcome) -> str:
    return (
        f"{outcome.task_name}: reward={outcome.reward} error={outcome.error}\n"
        f"verifier: {outcome.verifier_output[-800:]}\nagent: {agent_log(outcome)[-1500:]}"
    )
