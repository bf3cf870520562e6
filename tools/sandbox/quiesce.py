"""End every process an agent left in a container, from the host, before a shared verifier runs.

A verifier that shares the agent's container (a task that opted into `environment_mode =
"shared"`) must not meet anything the agent started: a background writer that rewrites the
reward, a watcher that swaps `/tests/test.sh` between upload and run. So when the agent's phase
ends every process in the container is stopped and killed from the host (signals sent by this
process to host pids: nothing inside the container, whose programs the agent may have replaced,
is asked to help). Only the container's init and the keep-alive loop the engine started with it
survive: they are the container, and neither runs agent code.

Processes are found by the container's pid namespace (`proctree`: not by cgroup, which the
engine's own helpers share); they are SIGSTOPped before they are SIGKILLed so none can fork in
between, and rounds repeat until none is left.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from .base import SandboxError
from .proctree import container_pids

MAX_ROUNDS = 50
# What engines run as the container's pid 1 with `--init` (podman bind-mounts catatonit as
# /run/podman-init); the keep-alive is then its child.
INIT_NAMES = frozenset({"catatonit", "podman-init", "docker-init", "tini", "tini-static"})


class QuiesceError(SandboxError):
    """The container's processes could not be seen or ended from this host."""


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(ppid, state, start time in ticks) of a host process, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[1]), fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _kept(init_pid: int, pids: list[int]) -> set[int]:
    """The container's init and, when init is an init binary, its first child (the keep-alive).

    The first child is the one with the earliest start time: every process the agent starts
    (orphans re-parented to init included) started later than the keep-alive did. With an
    unknown init nothing but init is kept: the container then ends (fail closed).
    """
    kept = {init_pid}
    children = []
    for pid in pids:
        facts = _stat(pid)
        if facts and facts[0] == init_pid and facts[1] != "Z":
            children.append((facts[2], pid))
    try:
        name = Path(f"/proc/{init_pid}/comm").read_text().strip()
    except OSError:
        name = ""
    if name in INIT_NAMES and children:
        kept.add(min(children)[1])
    return kept


def kill_container_processes(pidns: str | None, init_pid: int) -> int:
    """Kill every process of the container but init and the keep-alive; return how many died.

    Raises QuiesceError when the container's processes are not visible from here (an engine on
    another machine) or some survive every round.
    """
    if not pidns or init_pid <= 0 or _stat(init_pid) is None:
        raise QuiesceError(
            f"the container's processes (init pid {init_pid}) are not visible from this host; "
            "a shared verifier needs the engine on this machine"
        )
    killed: set[int] = set()
    for _ in range(MAX_ROUNDS):
        pids = container_pids(pidns) or []
        kept = _kept(init_pid, pids)
        targets = [p for p in pids if p not in kept and (f := _stat(p)) and f[1] != "Z"]
        if not targets:
            return len(killed)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in targets:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        killed.update(targets)
    raise QuiesceError(f"processes kept appearing after {MAX_ROUNDS} rounds of kills")
