"""quiesce.py's kill for a runsc sandbox: every process the agent left, ended from the host
through runsc's own control of its Sentry (`runsc ps`, `runsc kill --pid`), before a verifier
runs in that container.

Under gVisor the sandbox's processes are not host processes (quiesce.py cannot see them in
/proc), but runsc on the host lists and signals them without running anything inside the
container, whose programs the agent may have replaced. Kept, as in quiesce.py: pid 1 (the init)
and its earliest child (the keep-alive); execs of the engine show as children of pid 0.
"""

from __future__ import annotations

import subprocess

from .quiesce import MAX_ROUNDS, QuiesceError
from .runtimes import RUNSC

#: runsc's state folder as podman starts it (`--root` on runsc's own command line, measured).
STATE_ROOT = "/var/run/runsc"
CALL_SEC = 30


def _runsc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RUNSC, "--root", STATE_ROOT, *args],
        capture_output=True,
        text=True,
        timeout=CALL_SEC,
        check=False,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )


def processes(container_id: str) -> list[tuple[int, int]]:
    """(pid, ppid) of every process in the sandbox, as its Sentry reports them."""
    done = _runsc("ps", container_id)
    if done.returncode != 0:
        raise QuiesceError(f"runsc cannot list the sandbox's processes: {done.stderr[-300:]}")
    rows = []
    for line in done.stdout.splitlines()[1:]:  # UID PID PPID C TTY STIME TIME CMD
        fields = line.split()
        if len(fields) >= 3 and fields[1].isdigit() and fields[2].isdigit():
            rows.append((int(fields[1]), int(fields[2])))
    return rows


def kill_agent_processes(container_id: str) -> int:
    """Kill every process but the init and the keep-alive; return how many were killed."""
    killed: set[int] = set()
    for _ in range(MAX_ROUNDS):
        rows = processes(container_id)
        children = sorted(pid for pid, ppid in rows if ppid == 1)
        kept = {1, *children[:1]}
        targets = [pid for pid, _ in rows if pid not in kept]
        if not targets:
            return len(killed)
        for sig in ("STOP", "KILL"):
            for pid in targets:
                _runsc("kill", "--pid", str(pid), container_id, sig)
        killed.update(targets)
    raise QuiesceError(f"processes kept appearing after {MAX_ROUNDS} rounds of kills")
