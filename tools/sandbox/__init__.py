"""Sandboxes: one contract (`base.Sandbox`) on a container engine (podman or docker), a persistent shell."""

from autoenvscaling.tools.sandbox.base import (
    DEFAULT_BACKEND,
    Backend,
    BuildError,
    ExecOutput,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxRef,
    attach,
)
from autoenvscaling.tools.sandbox.shell import PersistentShell, ShellResult

__all__ = [
    "DEFAULT_BACKEND",
    "Backend",
    "BuildError",
    "ExecOutput",
    "PersistentShell",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxRef",
    "ShellResult",
    "attach",
    "start_workspace",
]


async def start_workspace(**kwargs):
    """A bare sandbox on the project's base image (see `container.start_workspace`)."""
    from autoenvscaling.tools.sandbox.container import start_workspace as start

    return await start(**kwargs)
