"""Our sandboxes as Harbor custom environments, so real Harbor runs trials on them:

    harbor run -p TASK -a oracle -e autoenvscaling.tools.sandbox.harbor_env:BwrapEnvironment

Harbor owns the trial (agent phase, tests hidden until the agent is done, verifier, reward files);
this adapter only maps its `BaseEnvironment` calls onto a `Sandbox`. A Harbor agent of ours reaches
the live sandbox through `environment.sandbox_ref` (see graphs/solver.py).
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, override

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import (
    EnvironmentCapabilities,
    EnvironmentResourceCapabilities,
)
from harbor.environments.definition import require_agent_environment_definition
from harbor.models.trial.paths import EnvironmentPaths

from autoenvscaling.tools.sandbox.base import Sandbox, SandboxError, SandboxLimits, SandboxRef

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
        return SandboxLimits(
            memory_mb=self._effective_memory_mb or DEFAULT_MEMORY_MB,
            cpus=self._effective_cpus,
        )

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
        self._sandbox = await self._start_sandbox(force_build)
        paths = EnvironmentPaths.for_os(self.os)
        await self.ensure_dirs([paths.agent_dir, paths.verifier_dir, paths.artifacts_dir])
        await self._upload_environment_dir_after_start()

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
            env=self._merge_env(env),
            timeout_sec=timeout_sec,
            user=self._resolve_user(user),
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
        await self.sandbox.upload(Path(source_dir), target_dir)

    @override
    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        await self.sandbox.download(source_path, Path(target_path))

    @override
    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        await self.sandbox.download(source_dir, Path(target_dir))


class BwrapEnvironment(SandboxEnvironment):
    """Daemonless bubblewrap sandbox over a cached Debian base (no engine, no registry)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.build_notes: list[str] = []

    @staticmethod
    @override
    def type() -> str:
        return "bwrap"

    @override
    async def _start_sandbox(self, force_build: bool) -> Sandbox:
        from autoenvscaling.tools.sandbox.bwrap import BwrapSandbox, build_image

        image = await build_image(
            self.environment_dir,
            docker_image=self.task_env_config.docker_image,
            force=force_build,
            timeout_sec=self.task_env_config.build_timeout_sec,
            log=self.logger.info,
        )
        for note in image.notes:
            self.logger.info(note)
        self.build_notes = image.notes
        return await BwrapSandbox.start(
            image,
            limits=self._limits(),
            network=False,
            env=dict(self._startup_env()),
            workdir=self.task_env_config.workdir or image.workdir,
        )


class DockerEnvironment(SandboxEnvironment):
    """A Docker engine through the `docker` SDK: no compose, no registry, never a network.

    Cleanup: `stop()` removes the container; if the trial's process dies first (even by SIGKILL)
    the engine removes it, because the container's main process ends when its owner's attach
    socket closes; and the first start in each process sweeps containers of dead owners
    (`cleanup_stale`) as a backstop.
    """

    _swept = False  # stale containers are swept once per process

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.image_tag: str | None = None

    @staticmethod
    @override
    def type() -> str:
        return "docker-sdk"

    @classmethod
    @override
    def resource_capabilities(cls) -> EnvironmentResourceCapabilities:
        return EnvironmentResourceCapabilities(
            cpu_limit=True, memory_limit=True, fractional_cpus=True
        )

    @classmethod
    @override
    def preflight(cls) -> None:
        from autoenvscaling.tools.sandbox.docker import client

        try:
            client()
        except SandboxError as exc:
            raise SystemExit(str(exc)) from exc

    @override
    async def _start_sandbox(self, force_build: bool) -> Sandbox:
        import asyncio

        from autoenvscaling.tools.sandbox.docker import DockerSandbox, build_image, cleanup_stale

        if not DockerEnvironment._swept:
            DockerEnvironment._swept = True
            report = await asyncio.to_thread(cleanup_stale)
            if report.containers:
                self.logger.info(f"removed stale containers: {', '.join(report.containers)}")
        image = await build_image(
            self.environment_dir,
            task_name=self.environment_name,
            docker_image=self.task_env_config.docker_image,
            force=force_build,
            timeout_sec=self.task_env_config.build_timeout_sec,
            log=self.logger.debug,
        )
        self.image_tag = image.tag
        return await DockerSandbox.start(
            image.tag,
            limits=self._limits(),
            env=dict(self._startup_env()),
            workdir=self.task_env_config.workdir,
        )
