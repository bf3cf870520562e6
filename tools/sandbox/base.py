"""The sandbox contract, and the engines (`Backend`) it runs on: podman (default) or docker.

A sandbox is one live, isolated root filesystem with processes in it. Harbor's environments, the
terminal MCP server and the trainer all drive sandboxes through this one interface, and any of
them can attach to a live sandbox from another process through its serialisable `SandboxRef`.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from .shell import PersistentShell, ShellResult

Backend = Literal["podman", "docker"]
DEFAULT_BACKEND: Backend = "podman"
#: OCI runtimes of podman sandboxes (runtimes.py has what each means); "auto" picks at start.
RuntimeName = Literal["runc", "runsc"]
RuntimeSetting = Literal["runc", "runsc", "auto"]


class SandboxError(RuntimeError):
    """A sandbox could not be built, started, reached or cleaned up."""


class EngineUnavailableError(SandboxError):
    """The engine cannot be started or reached. The message says why and what to install."""


class EngineWedgedError(EngineUnavailableError):
    """The engine did not answer within its bound: an infrastructure failure, with the state of
    its storage and the commands that recover it in the message."""


class BuildError(SandboxError):
    """The task's environment definition could not be built. The message says which line and why."""


class SandboxLimitError(SandboxError):
    """The sandbox was stopped at one of its limits (the writable-layer cap): what ran in it went
    over, the engine did not fail (tools/trials/faults.py: the policy's outcome, not an error)."""


class SandboxLimits(BaseModel):
    """Resource limits applied to every process in the sandbox."""

    memory_mb: int | None = Field(default=2048, description="Memory ceiling for the whole sandbox.")
    pids: int | None = Field(
        default=512, description="Most processes alive at once in the sandbox."
    )
    cpus: float | None = Field(default=None, description="CPUs (a share of the machine's).")
    disk_mb: int | None = Field(
        default=None,
        description="Cap on the container's writable layer (default: the configured max).",
    )
    output_bytes: int = Field(
        default=1_000_000, description="Cap on one command's captured output."
    )


class SandboxRef(BaseModel):
    """Everything another process needs to attach to a live sandbox."""

    backend: Backend
    id: str
    workdir: str = "/"
    env: dict[str, str] = Field(default_factory=dict)
    user: str | None = None
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    network: bool = False
    # Engine handles: the container id, its pid namespace, docker's DOCKER_HOST.
    handle: dict[str, Any] = Field(default_factory=dict)


class ExecOutput(BaseModel):
    """What one command in a sandbox produced."""

    exit_code: int | None = Field(description="None when the command was killed by its timeout.")
    stdout: str = ""
    stderr: str = ""
    duration_sec: float = 0.0
    timed_out: bool = False
    truncated: bool = False


class Sandbox(abc.ABC):
    """A live sandbox. Backends implement this; callers never branch on the backend."""

    ref: SandboxRef

    @abc.abstractmethod
    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: float | None = None,
        user: str | int | None = None,
    ) -> ExecOutput:
        """Run `bash -c command` in a fresh process inside the sandbox."""

    @abc.abstractmethod
    async def upload(self, source: Path, target: str) -> None:
        """Copy a host file or folder to `target` inside the sandbox (folders: contents into target)."""

    @abc.abstractmethod
    async def download(self, source: str, target: Path) -> list[str] | None:
        """Copy a sandbox file or folder to `target` on the host (folders: contents into target).
        Returns what was skipped ("path (why)"), when the backend degrades rather than fails."""

    @abc.abstractmethod
    async def open_shell(
        self, *, cwd: str | None = None, env: dict[str, str] | None = None
    ) -> PersistentShell:
        """Start one long-lived bash in the sandbox; cwd and environment persist between commands."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop every process and release the sandbox's resources. Safe to call twice."""

    async def is_alive(self) -> bool:
        result = await self.exec("true", timeout_sec=10)
        return result.exit_code == 0

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class Shell(Protocol):
    """What a terminal needs from a shell: `PersistentShell` (a live process in a sandbox of
    ours) and `ExecShell` (tools/sandbox/exec_shell.py: any sandbox's `exec`) behave alike."""

    sandbox: Sandbox | None

    @property
    def busy(self) -> bool: ...

    async def run(self, command: str, timeout_sec: float | None = 120) -> ShellResult: ...

    async def read(self, timeout_sec: float = 10) -> ShellResult: ...

    async def interrupt(self, grace_sec: float = 3) -> ShellResult: ...

    async def close(self) -> None: ...
