"""Sandboxes: one contract (`base.Sandbox`), backends `bwrap` and `docker`, a persistent shell."""

from autoenvscaling.tools.sandbox.base import (
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
