"""Sandboxes: one contract (`base.Sandbox`) on a container engine (podman or docker), a persistent shell.

The contract (base.py) imports none of its implementations; tests/test_import_graph.py keeps
`tools/` free of import circles.
"""

from .base import (
    Backend,
    BuildError,
    ExecOutput,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxRef,
)
from .shell import PersistentShell, ShellResult


async def attach(ref: SandboxRef) -> Sandbox:
    """Attach to a live sandbox started by another process (or this one)."""
    # lazy: the container pulls in the whole engine stack (docker's SDK and more), which the
    # contract's importers (settings, models) must not load.
    from .container import ContainerSandbox

    return await ContainerSandbox.attach(ref)


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
