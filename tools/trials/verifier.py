"""Where a task's tests run: Harbor 0.25's verifier modes, as our tasks use them.

- **separate** (our default, Harbor's `[verifier] environment_mode = "separate"`): after the agent
  phase the agent's work — the task's `artifacts` (every task we write declares its workdir,
  `/app`) — is copied out of the agent's container by Harbor's own `ArtifactHandler`, the agent's
  container is removed (every process in it with it), and the tests run in a fresh container of
  the task's built image with that work copied in. Wrappers, `.pth` hooks, `ld.so.preload`,
  replaced interpreters and background writers the agent left outside its work never meet the
  tests.
- **shared** (a task opts in when its tests must inspect system state: a service's config, an
  installed package): the tests run in the agent's container; our Harbor environment kills every
  agent process from the host when the agent's phase ends (when Harbor fetches `/logs/agent`)
  and again before `/tests` arrives (`harbor_env`), and the gate marks the task
  (`Verdict.verifier_mode`) so the pool says which tasks rely on it.

Harbor's `Trial` runs this protocol itself for `harbor run`, the gate and solver trials.
`run_verifier` is the same protocol for paths that drive an environment without a `Trial` (the
GRPO episode), built from the same Harbor parts so the two cannot drift.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import stat
import tomllib
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from harbor.environments.factory import EnvironmentFactory
from harbor.models.task.config import TaskConfig
from harbor.models.task.verifier_mode import (
    VerifierEnvironmentMode,
    resolve_task_verifier_mode,
    resolve_verifier_environment_definition,
)
from harbor.models.trial.config import VerifierConfig
from harbor.models.trial.paths import EnvironmentPaths
from harbor.trial.artifact_handler import ArtifactHandler
from harbor.trial.errors import VerifierTimeoutError
from harbor.verifier.factory import VerifierFactory

from ..tasks.dockerfile import Dockerfile, DockerfileError
from ..tasks.limits import TaskLimits

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment
    from harbor.models.task.task import Task
    from harbor.models.trial.paths import TrialPaths
    from harbor.models.verifier.result import VerifierResult

VerifierMode = Literal["separate", "shared"]
DEFAULT_WORKDIR = "/app"
#: In a trial folder: what the copy of the agent's work to a separate verifier left out
#: (harbor_env writes it; the trial's outcome and the verifier's /logs/verifier name it).
WORK_SKIPPED_FILE = "work-copy-skipped.json"
MAX_SKIPPED = 200

log = logging.getLogger(__name__)


def work_skipped(trial_dir: Path | str) -> list[str]:
    """What the copy of the work left out, "path (why)", as recorded in the trial folder."""
    try:
        data = json.loads((Path(trial_dir) / WORK_SKIPPED_FILE).read_text())
    except (OSError, ValueError):
        return []
    skipped = data.get("skipped") if isinstance(data, dict) else None
    return [str(x) for x in skipped] if isinstance(skipped, list) else []


class VerifierRunError(RuntimeError):
    """The verifier gave no valid reward (no reward file, unparsable, timed out) or could not be
    run; raised from the cause, whose type tools/trials/faults.py classifies."""


def verifier_mode(task_dir: Path | str) -> VerifierMode | None:
    """The task's effective verifier mode by Harbor's rules; None when task.toml is unreadable."""
    text = _small_toml_text(Path(task_dir) / "task.toml")
    if text is None:
        return None
    try:
        config = TaskConfig.model_validate_toml(text)
    except (ValueError, RecursionError):
        return None
    return resolve_task_verifier_mode(config).value


def shared_verifier_risk(task_dir: Path | str) -> str | None:
    """Why a policy trained on this task could forge its reward, or None.

    A shared verifier runs the tests in the agent's container: an agent running as root can
    replace what they run (python3, pytest, a library) and score 1.0 with no work, by design.
    Safe: a separate verifier, or a shared one whose agent runs as an unprivileged user
    (`[agent] user`) while the tests run as root. Unreadable task.toml: a risk (fail closed).
    """
    text = _small_toml_text(Path(task_dir) / "task.toml")
    try:
        config = TaskConfig.model_validate_toml(text or "")
    except (ValueError, RecursionError):
        return "its task.toml cannot be read"
    if resolve_task_verifier_mode(config).value == "separate":
        return None
    agent, tests = config.agent.user, config.verifier.user
    if agent not in (None, "", "root", 0, "0") and tests in (None, "", "root", 0, "0"):
        return None
    return (
        "its verifier shares the agent's container and the agent runs as "
        f"{agent or 'root'}, so the agent can replace what the tests run"
    )


def _small_toml_text(path: Path) -> str | None:
    """task.toml's text when it is a small regular UTF-8 file; None otherwise. A hostile task.toml
    may be a link, a FIFO (reading it would block), huge, or not text: lint reports those."""
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > TaskLimits().max_toml_bytes:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def default_to_separate(task_dir: Path | str) -> bool:
    """Put a task that states no verifier mode on the separate verifier, its workdir copied in.

    What a proposer writes gets the same default as the seed pool: `environment_mode =
    "separate"` under `[verifier]` and, when the task declares no `artifacts`, its workdir as the
    one artifact. A task that states a mode (shared included) is left as written. Returns
    whether task.toml changed. The edit is textual so the author's comments and layout stay.
    """
    path = Path(task_dir) / "task.toml"
    text = _small_toml_text(path)
    if text is None:
        return False  # the gate's lint stage reports an unreadable task.toml
    try:
        raw = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):  # RecursionError: a nesting bomb
        return False
    verifier = raw.get("verifier", {})
    if not isinstance(verifier, dict) or {"environment_mode", "environment"} & verifier.keys():
        return False  # a mode stated by the author (or a malformed table lint will report)
    lines = text.splitlines(keepends=True)
    if text and not text.endswith("\n"):
        lines[-1] += "\n"
    header = re.compile(r"^\s*\[\s*verifier\s*\]\s*(#.*)?$")
    at = next((i for i, line in enumerate(lines) if header.match(line)), None)
    if at is None:
        lines += ["\n", "[verifier]\n", 'environment_mode = "separate"\n']
    else:
        lines.insert(at + 1, 'environment_mode = "separate"\n')
    if "artifacts" not in raw:
        workdir = (raw.get("environment") or {}).get("workdir") or _dockerfile_workdir(task_dir)
        first_table = next(
            (i for i, line in enumerate(lines) if re.match(r"^\s*\[", line)), len(lines)
        )
        lines[first_table:first_table] = [f"artifacts = [{_toml_string(workdir)}]\n", "\n"]
    path.write_text("".join(lines), encoding="utf-8")
    return True


def _dockerfile_workdir(task_dir: Path | str) -> str:
    """The final WORKDIR of environment/Dockerfile (the task's workdir), else /app."""
    try:
        return Dockerfile.read(Path(task_dir) / "environment" / "Dockerfile").workdir() or (
            DEFAULT_WORKDIR
        )
    except DockerfileError:
        return DEFAULT_WORKDIR  # lint reports an unreadable Dockerfile


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


async def run_verifier(
    task: Task,
    agent_environment: BaseEnvironment,
    trial_paths: TrialPaths,
    *,
    environment_config: Any,
    logger: logging.Logger | None = None,
) -> VerifierResult:
    """Verify the agent's work the way a Harbor trial does, for the task's verifier mode.

    `environment_config` is the Harbor `EnvironmentConfig` (`import_path=...`) the agent's
    environment came from; a separate verifier gets a fresh environment of it. The agent's
    environment is stopped here in separate mode (the caller may stop it again: stop is
    idempotent). Raises VerifierRunError when no valid reward comes back.
    """
    logger = logger or log
    config = task.config.verifier

    async def verify(environment: BaseEnvironment, *, bundled_tests: bool = False) -> Any:
        with environment.with_default_user(config.user):
            verifier = VerifierFactory.create_verifier_from_config(
                VerifierConfig(),
                task=task,
                trial_paths=trial_paths,
                environment=environment,
                logger=logger,
                skip_tests_upload=bundled_tests,
            )
            try:
                return await asyncio.wait_for(verifier.verify(), config.timeout_sec)
            except TimeoutError:
                # Raised from Harbor's own type, the name a trial records for the same event:
                # tools/trials/faults.py reads the task's fault from it.
                message = f"verifier timed out after {config.timeout_sec:.0f}s"
                raise VerifierRunError(message) from VerifierTimeoutError(message)
            except Exception as exc:
                raise VerifierRunError(f"{type(exc).__name__}: {exc}") from exc

    agent_paths = EnvironmentPaths.for_os(agent_environment.os)
    # The agent's phase is over: fetch its logs as a trial does (our environments end every
    # process the agent started right here, before anything is copied or verified).
    await agent_environment.download_dir(agent_paths.agent_dir.as_posix(), trial_paths.agent_dir)
    if resolve_task_verifier_mode(task.config) == VerifierEnvironmentMode.SHARED:
        return await verify(agent_environment)

    handler = ArtifactHandler(artifacts=task.config.artifacts, logger=logger)
    handler.begin_collection()
    await handler.download_artifacts(
        agent_environment,
        trial_paths.artifacts_dir,
        source_artifacts_dir=agent_paths.artifacts_dir,
    )
    await agent_environment.stop(delete=True)  # the agent's processes end with its container

    definition = resolve_verifier_environment_definition(task.config, task.paths)
    if definition is None:  # cannot happen in separate mode; Harbor raises the same way
        raise VerifierRunError("separate verifier mode did not resolve an environment")
    environment = EnvironmentFactory.create_environment_from_config(
        config=environment_config,
        environment_dir=definition.directory,
        enable_environment_dir_upload=not definition.bundled_tests,
        environment_name=task.short_name,
        session_id=f"verifier-{uuid.uuid4().hex[:12]}",
        trial_paths=trial_paths,
        task_env_config=definition.config,
        logger=logger,
    )
    try:
        await environment.start(force_build=False)
        paths = EnvironmentPaths.for_os(environment.os)
        await environment.empty_dirs([paths.verifier_dir], chmod=True)
        await handler.upload_artifacts(
            environment,
            artifacts_dir=trial_paths.artifacts_dir,
            source_artifacts_dir=agent_paths.artifacts_dir,
            target_artifacts_dir=paths.artifacts_dir,
        )
        return await verify(environment, bundled_tests=definition.bundled_tests)
    finally:
        await asyncio.shield(environment.stop(delete=True))
