"""The red-team suite's set-up: the default engine (a failure to start it FAILS the suite: it is
`engine_ready` of tests/conftest.py), attack task folders, and trials run concurrently so the
whole suite stays short.

Every attack is a real Harbor task whose `solution/solve.sh` (run by Harbor's oracle agent) or
`environment/Dockerfile` IS the attack; the verdict is read from Harbor's own trial result.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import textwrap
from pathlib import Path

from autoenvscaling.tools.trials.trial import ENVIRONMENTS, TrialOutcome, run_trial
from tests.security.naive_env import IMPORT_PATH as NAIVE_IMPORT_PATH

#: The backend the project runs trials on by default (tools/trials/trial.py).
BACKEND = "podman"
#: The controls' environment: a shared verifier that does not end the agent's processes.
NAIVE = "naive-shared"
ENVIRONMENTS.setdefault(NAIVE, {"import_path": NAIVE_IMPORT_PATH})
#: Trials in flight at once (each separate-verifier trial runs two containers).
CONCURRENCY = 4


def sandbox_runtime() -> str:
    """The OCI runtime this session's podman sandboxes start under: the suite runs whole under
    each (`make test-security-runsc` runs it with AUTOENVSCALING_SANDBOX_RUNTIME=runsc), and an
    attack whose defence differs by runtime checks that runtime's (tools/sandbox/runtimes.py)."""
    from autoenvscaling.tools.sandbox import runtimes

    return runtimes.choice(BACKEND).runtime


def build_image(name: str, dockerfile: str, files: dict[str, str] | None = None) -> str:
    """Build one image for a family of attack tasks (they name it as `docker_image`)."""
    from autoenvscaling.tools.sandbox.images import build_image as build

    context = Path(tempfile.mkdtemp(prefix=f"aes-security-{name}-")) / "environment"
    context.mkdir()
    (context / "Dockerfile").write_text(dockerfile)
    for rel, text in (files or {}).items():
        (context / rel).write_text(text)
    try:
        image = asyncio.run(
            build(context, backend=BACKEND, task_name=f"security-{name}", timeout_sec=300)
        )
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
    environment_toml: str = "",
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
        f"memory_mb = {memory_mb}\nbuild_timeout_sec = 300\n{environment_toml}"
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
