"""Our sandboxes as Harbor custom environments, so real Harbor runs trials on them:

    harbor run -p TASK -a oracle -e autoenvscaling.tools.sandbox.harbor_env:HardenedPodmanEnvironment

Harbor owns the trial (agent phase, tests hidden until the agent is done, verifier, reward files);
this adapter only maps its `BaseEnvironment` calls onto a `Sandbox`. A Harbor agent of ours reaches
the live sandbox through `environment.sandbox_ref` (see graphs/solver/harbor_agent.py).
"""

from __future__ import annotations

import abc
import asyncio
import json
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, override

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import (
    EnvironmentCapabilities,
    EnvironmentResourceCapabilities,
)
from harbor.environments.definition import require_agent_environment_definition
from harbor.models.trial.paths import EnvironmentPaths

from .. import harbor_adapter
from ..settings import get_settings
from ..tasks.host_env import host_templates, refusal
from ..trials.verifier import MAX_SKIPPED, WORK_SKIPPED_FILE, work_skipped
from .base import (
    Backend,
    BuildError,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxRef,
)
from .container import ContainerSandbox
from .engine import call, client
from .gvisor_procs import kill_agent_processes
from .images import build_image
from .quiesce import kill_container_processes

DEFAULT_MEMORY_MB = 2048


class SandboxEnvironment(BaseEnvironment, abc.ABC):
    """Shared adapter: subclasses only say how to build and start their sandbox."""

    _sandbox: Sandbox | None = None

    @override
    def _validate_definition(self) -> None:
        require_agent_environment_definition(
            self.environment_dir, docker_image=self.task_env_config.docker_image
        )

    @property
    @override
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True)

    @classmethod
    @override
    def resource_capabilities(cls) -> EnvironmentResourceCapabilities:
        return EnvironmentResourceCapabilities(memory_limit=True)

    def _limits(self) -> SandboxLimits:
        # Clamped to the configured maxima when the container starts (profile.clamp).
        memory_mb, cpus, disk_mb = harbor_adapter.resources(self)
        return SandboxLimits(memory_mb=memory_mb or DEFAULT_MEMORY_MB, cpus=cpus, disk_mb=disk_mb)

    @abc.abstractmethod
    async def _start_sandbox(self, force_build: bool) -> Sandbox:
        """Build the task's image (cached) and start a sandbox without network."""

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            raise SandboxError(f"environment {self.session_id} is not started")
        return self._sandbox

    @property
    def sandbox_ref(self) -> SandboxRef:
        """Serialisable handle another process (the terminal MCP server) attaches with."""
        return self.sandbox.ref

    @override
    async def start(self, force_build: bool) -> None:
        # Harbor fills task.toml templates from this process's environment (API keys): refused
        # here whatever the caller linted, before a value can reach the sandbox.
        if found := host_templates(self.environment_dir.parent):
            raise BuildError(refusal(found))
        self._sandbox = await self._start_sandbox(force_build)
        paths = EnvironmentPaths.for_os(self.os)
        await self.ensure_dirs([paths.agent_dir, paths.verifier_dir, paths.artifacts_dir])
        await harbor_adapter.upload_environment_dir(self)

    @override
    async def stop(self, delete: bool) -> None:
        if self._sandbox is not None:
            await self._sandbox.close()

    @override
    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        result = await self.sandbox.exec(
            command,
            cwd=cwd or self.task_env_config.workdir,
            env=harbor_adapter.exec_env(self, env),
            timeout_sec=timeout_sec,
            user=harbor_adapter.exec_user(self, user),
        )
        if result.timed_out:
            # Harbor's own backends signal a timeout this way; its verifier maps it to a failure.
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds")
        return ExecResult(
            stdout=result.stdout,
            stderr=result.stderr,
            return_code=result.exit_code if result.exit_code is not None else -1,
        )

    @override
    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await self.sandbox.upload(Path(source_path), target_path)

    @override
    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        if PurePosixPath(target_dir) == EnvironmentPaths.for_os(self.os).tests_dir:
            # Harbor uploads the tests only when the agent is done: in a shared verifier no
            # agent process may be alive to meet them (tools/trials/verifier.py).
            await self.end_agent_processes()
            await self.sandbox.upload(Path(source_dir), target_dir)
            await self._tell_verifier_what_was_skipped()
            return
        await self.sandbox.upload(Path(source_dir), target_dir)

    @override
    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        await self.sandbox.download(source_path, Path(target_path))

    @override
    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        if PurePosixPath(source_dir) == EnvironmentPaths.for_os(self.os).agent_dir:
            # Harbor fetches the agent's logs once its phase has ended: from here on nothing the
            # agent started may run (a writer that would wait for the reward files, a watcher
            # for /tests, one that edits the work while it is copied to a separate verifier).
            await self.end_agent_processes()
        elif PurePosixPath(source_dir) == EnvironmentPaths.for_os(self.os).verifier_dir:
            # The tests are done and their reward is read next: whatever they started (the
            # agent's program a check ran, a hook of the agent's repository) ends first, so
            # nothing outlives the tests to rewrite the reward. Best effort: an engine whose
            # processes this host cannot see still gets its reward read.
            try:
                await self.end_agent_processes()
            except SandboxError as exc:
                self.logger.warning(f"processes left by the tests not ended: {exc}")
        skipped = await self.sandbox.download(source_dir, Path(target_dir))
        if skipped and not PurePosixPath(source_dir).is_relative_to("/logs"):
            self._record_work_skipped(skipped)

    def _record_work_skipped(self, skipped: list[str]) -> None:
        """Name in the trial folder what the copy of the agent's work left out (a link out of
        the folder, a file past the cap): the trial's outcome and the verifier read it."""
        record = work_skipped(self.trial_paths.trial_dir) + skipped
        path = self.trial_paths.trial_dir / WORK_SKIPPED_FILE
        path.write_text(json.dumps({"skipped": record[:MAX_SKIPPED]}, indent=1))
        self.logger.warning(f"the copy of the work left out {len(skipped)}: {skipped[:3]}")

    async def _tell_verifier_what_was_skipped(self) -> None:
        """The tests see what of the work did not arrive, in /logs/verifier (next to their
        output, so it is in the trial's verifier folder too)."""
        skipped = work_skipped(self.trial_paths.trial_dir)
        if not skipped:
            return
        note = self.trial_paths.trial_dir / "work-copy-skipped.txt"
        note.write_text(
            "Not copied from the agent's work into this verifier:\n"
            + "".join(f"{line}\n" for line in skipped)
        )
        target = EnvironmentPaths.for_os(self.os).verifier_dir / note.name
        await self.sandbox.upload(note, target.as_posix())

    async def end_agent_processes(self) -> int:
        """Kill every process the agent left in the sandbox; return how many. See quiesce.py."""
        self.logger.warning(
            f"{self.type()}: cannot end the agent's processes before a shared verifier"
        )
        return 0


class EngineEnvironment(SandboxEnvironment):
    """A container engine through the `docker` SDK: no compose, no registry, no network unless
    the gate grants the task the internet (`network`, podman's slirp4netns only: netns.py).

    Cleanup: `stop()` removes the container; if the trial's process dies first (even by SIGKILL)
    the engine removes it, because the container's main process ends when its owner's attach
    socket closes; and the first start in each process sweeps containers of dead owners
    (`cleanup.cleanup_stale`) as a backstop.
    """

    engine: ClassVar[Backend] = "podman"

    def __init__(self, *args: Any, network: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.image_tag: str | None = None
        self.build_notes: list[str] = []
        # The gate's grant (EnvironmentConfig kwargs): this task declared the internet and the
        # user's policy allows it. Build, agent and verifier containers then share one kind of
        # network, slirp4netns without the host's loopback (netns.py); otherwise none.
        self.network = network

    @classmethod
    @override
    def resource_capabilities(cls) -> EnvironmentResourceCapabilities:
        return EnvironmentResourceCapabilities(
            cpu_limit=True, memory_limit=True, fractional_cpus=True
        )

    @classmethod
    @override
    def preflight(cls) -> None:
        try:
            client(cls.engine)
        except SandboxError as exc:
            raise SystemExit(str(exc)) from exc

    @override
    async def _start_sandbox(self, force_build: bool) -> Sandbox:
        image = await build_image(
            self.environment_dir,
            backend=self.engine,
            task_name=self.environment_name,
            docker_image=self.task_env_config.docker_image,
            force=force_build,
            timeout_sec=self.task_env_config.build_timeout_sec,
            log=self.logger.debug,
            network=self.network,
        )
        self.image_tag = image.tag
        sandbox = await ContainerSandbox.start(
            image.tag,
            backend=self.engine,
            limits=self._limits(),
            env=harbor_adapter.startup_env(self),
            workdir=self.task_env_config.workdir,
            network=self.network,
        )
        # Harbor's root execs (set-up, verifier) then skip the per-call engine round trip.
        if get_settings().control_channel and not await sandbox.open_control():
            self.logger.debug("no control channel: every exec takes the engine's exec API")
        return sandbox

    @override
    async def end_agent_processes(self) -> int:
        handle = self.sandbox.ref.handle
        if handle.get("runtime") == "runsc":  # not host processes: runsc ends them (gvisor_procs)
            killed = await asyncio.to_thread(kill_agent_processes, handle["container_id"])
        else:
            api = client(self.engine).api
            state = (await call(api.inspect_container, handle["container_id"]))["State"]
            killed = await asyncio.to_thread(
                kill_container_processes, handle.get("pidns"), int(state.get("Pid") or 0)
            )
        if killed:
            self.logger.info(f"killed {killed} agent processes before the verifier")
        if get_settings().control_channel:
            # The kill ended the control channel too: a fresh one, opened with no agent process
            # left, serves the verifier's execs.
            if isinstance(self.sandbox, ContainerSandbox):
                await self.sandbox.reopen_control()
        return killed


class HardenedPodmanEnvironment(EngineEnvironment):
    """podman (the default): our own `podman system service`, started and stopped by us."""

    engine: ClassVar[Backend] = "podman"

    @staticmethod
    @override
    def type() -> str:
        return "podman-sdk"


class HardenedDockerEnvironment(EngineEnvironment):
    """A docker daemon that already answers (DOCKER_HOST or the default socket)."""

    engine: ClassVar[Backend] = "docker"

    @staticmethod
    @override
    def type() -> str:
        return "docker-sdk"
