"""Sandboxes: one contract (`base.Sandbox`) on a container engine (podman or docker), a persistent shell."""

from autoenvscaling.tools.sandbox.base import (
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
]
