"""Killing a command's whole process tree inside a container, and nothing else.

A command carries a marker in its environment; every process with that marker, plus all its
descendants (a child may have cleared its environment), is stopped then killed, in rounds until
none is left. From the host's /proc when the engine runs on this machine (works even when the pids
limit leaves no room for one more process), else with a POSIX sh script exec'd in the container.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

# Kill every process carrying the marker `$1` in its environment, plus all their descendants (a
# child may have cleared its environment); with `$2` = 1 the marked process the engine started
# (the persistent shell: its parent is outside the container, ppid 0) is spared. Processes are
# stopped before they are killed so none can fork in between; rounds repeat until none is left.
# POSIX sh + grep -z: the fallback when the container's processes are not visible from here.
KILL_TREE = r"""
tag="$1"; keep="$2"; round=0
while [ $round -lt 20 ]; do
  round=$((round + 1))
  marked=""
  for f in $(grep -lzx -- "$tag" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}; marked="$marked ${p%/environ}"
  done
  pairs=""
  for d in /proc/[0-9]*; do
    { read -r st < "$d/stat"; } 2>/dev/null || continue
    set -- ${st##*) }
    [ "$1" = Z ] && continue
    pairs="$pairs ${d#/proc/}:$2"
  done
  top=""
  if [ "$keep" = 1 ]; then
    for p in $marked; do
      for pr in $pairs; do [ "$pr" = "$p:0" ] && top=$p; done
    done
  fi
  set_=" $marked $top "
  changed=1
  while [ $changed = 1 ]; do
    changed=0
    for pr in $pairs; do
      c=${pr%%:*}
      case "$set_" in *" $c "*) continue ;; esac
      case "$set_" in *" ${pr#*:} "*) set_="$set_$c "; changed=1 ;; esac
    done
  done
  targets=""
  for p in $set_; do
    alive=0
    for pr in $pairs; do [ "${pr%%:*}" = "$p" ] && alive=1; done
    [ $alive = 1 ] && [ "$p" != "$top" ] && [ "$p" != "$$" ] && [ "$p" != 1 ] && targets="$targets $p"
  done
  [ -z "$targets" ] && exit 0
  kill -STOP $targets 2>/dev/null
  kill -KILL $targets 2>/dev/null
done
"""


def container_pids(pidns: str | None) -> list[int] | None:
    """Host pids in the container's pid namespace, or None when they are not visible from here.

    By namespace, not by cgroup: the engine's own helpers (conmon, runc) share the container's
    cgroup name but not its pid namespace, and must never be mistaken for its processes.
    """
    if not pidns:
        return None
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry.name}/ns/pid") == pidns:
                found.append(int(entry.name))
        except OSError:
            continue
    return found or None


def _proc_facts(pid: int) -> tuple[int, str, bytes] | None:
    """(ppid, state, environ) of a host process, or None if it is gone or unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(stat[1]), stat[0], Path(f"/proc/{pid}/environ").read_bytes()
    except (OSError, IndexError, ValueError):
        return None


def kill_tree_host(pidns: str | None, mark: str, keep_top: bool) -> bool:
    """The host-side twin of KILL_TREE. False when the container's processes are not visible."""
    needle = mark.encode()
    for _ in range(20):
        pids = container_pids(pidns)
        if pids is None:
            return False
        facts = {pid: f for pid in pids if (f := _proc_facts(pid)) and f[1] != "Z"}
        marked = {pid for pid, f in facts.items() if needle in f[2].split(b"\0")}
        # The shell was started by the engine (its parent is outside the container); orphans
        # of earlier commands were adopted by the init and are fair game.
        top = {pid for pid in marked if facts[pid][0] not in pids} if keep_top else set()
        targets = set(marked)
        grew = True
        while grew:
            grew = False
            for pid, f in facts.items():
                if pid not in targets and f[0] in targets:
                    targets.add(pid)
                    grew = True
        targets -= top
        if not targets:
            return True
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in targets:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
    return True


def exec_quiet(api: Any, container_id: str, argv: list[str]) -> bytes:
    created = api.exec_create(container_id, argv, user="root")
    return api.exec_start(created["Id"])
