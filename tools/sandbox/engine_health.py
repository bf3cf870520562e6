"""The state of podman's shared storage, read without asking podman: a wedged engine answers nothing.

What wedged it before (issue 38): a mount hidden under the engine's own bind of its overlay home,
a layer its removal left "incomplete", and then every podman process retrying that layer's
deletion while holding the storage lock, the others queued behind it. So this reads the three
straight from the kernel and the store's files: who holds or waits for the storage lock files
(`/proc/locks`), which layers are flagged incomplete (`layers.json`), which mounts under the store
no path reaches any more (`/proc/self/mountinfo`), and our layer filesystems left by a dead
process (layerfs.py). For the watchdog's error (engine.py) and `doctor`, with the commands that
bring the engine back.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from pydantic import BaseModel, Field

from .cleanup import owner_alive
from .layerfs import BACKING_FOLDER

#: podman's rootful defaults (graphroot, runroot); ours are never changed (engine.py).
STORAGE_ROOT = Path("/var/lib/containers/storage")
RUN_ROOT = Path("/run/containers/storage")
OVERLAY_HOME = STORAGE_ROOT / "overlay"
_LOCK_LINE = re.compile(
    r"^\d+:\s+(?P<blocked>->\s+)?\S+\s+\S+\s+(?P<kind>READ|WRITE)\s+(?P<pid>-?\d+)\s+"
    r"(?P<major>[0-9a-f]+):(?P<minor>[0-9a-f]+):(?P<inode>\d+)\s"
)


class LockUse(BaseModel):
    path: str = Field(description="The storage lock file.")
    kind: str = Field(description="READ or WRITE.")
    pid: int
    command: str = Field(description="The process's command line, or '?' when it is gone.")
    waiting: bool = Field(description="True: queued for the lock; False: holds it.")


class HiddenMount(BaseModel):
    mount_id: int
    mountpoint: str
    source: str
    covered_by: str = Field(description="What the path reaches instead (a later mount).")


class EngineHealth(BaseModel):
    locks: list[LockUse] = Field(default_factory=list)
    incomplete_layers: list[str] = Field(default_factory=list)
    hidden_mounts: list[HiddenMount] = Field(default_factory=list)
    leftover_caps: list[str] = Field(
        default_factory=list, description="Our layer filesystems still mounted (layerfs.py)."
    )

    @property
    def faults(self) -> list[str]:
        """What is wrong: a lock use alone is not (podman takes them all the time)."""
        found = [f"layer {layer[:12]} left incomplete" for layer in self.incomplete_layers]
        found += [
            f"{m.source} on {m.mountpoint} hidden under {m.covered_by}" for m in self.hidden_mounts
        ]
        return found

    def describe(self) -> str:
        held = [
            f"{u.kind} {u.path} held by {u.pid} ({u.command})" for u in self.locks if not u.waiting
        ]
        queued = sum(u.waiting for u in self.locks)
        parts = [
            "storage locks: "
            + ("; ".join(held) if held else "none held")
            + (f", {queued} waiting" if queued else ""),
            "incomplete layers: " + (", ".join(x[:12] for x in self.incomplete_layers) or "none"),
            "hidden mounts: "
            + (", ".join(f"{m.mountpoint} ({m.source})" for m in self.hidden_mounts) or "none"),
        ]
        if self.leftover_caps:
            parts.append("layer filesystems left mounted: " + ", ".join(self.leftover_caps))
        return "; ".join(parts)

    def recovery(self) -> list[str]:
        """The exact commands that bring the engine back, in order (root)."""
        steps: list[str] = []
        pids = sorted({u.pid for u in self.locks if u.pid > 0 and u.command != "?"})
        if pids:
            steps.append(
                f"kill {' '.join(map(str, pids))}  # podman processes holding or queued "
                "for the storage lock; stop the runs that use the engine first"
            )
        if self.hidden_mounts:
            covers = sorted({m.covered_by for m in self.hidden_mounts}, key=len, reverse=True)
            steps += [f"umount {path}  # the bind that hides them" for path in covers]
            steps += [f"umount {m.mountpoint}" for m in self.hidden_mounts]
        steps += [f"umount -l {path}" for path in self.leftover_caps]
        if self.incomplete_layers:
            steps.append("podman ps -a  # deletes the incomplete layers ('Found incomplete layer')")
        return steps


def read(storage_root: Path = STORAGE_ROOT, run_root: Path = RUN_ROOT) -> EngineHealth:
    """The engine's state now. Never calls podman, never blocks on a lock."""
    return EngineHealth(
        locks=lock_uses(storage_root, run_root),
        incomplete_layers=incomplete_layers(storage_root),
        hidden_mounts=hidden_mounts(storage_root),
        leftover_caps=leftover_caps(storage_root),
    )


def lock_uses(storage_root: Path = STORAGE_ROOT, run_root: Path = RUN_ROOT) -> list[LockUse]:
    """Every holder and waiter of a storage lock file, from `/proc/locks`."""
    files: dict[tuple[int, int, int], Path] = {}
    for root in (storage_root, run_root):
        for pattern in ("*.lock", "*/*.lock"):
            for path in root.glob(pattern):
                try:
                    st = path.stat()
                except OSError:
                    continue
                files[(os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)] = path
    uses = []
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        if not (m := _LOCK_LINE.match(line)):
            continue
        key = (int(m["major"], 16), int(m["minor"], 16), int(m["inode"]))
        if (path := files.get(key)) is None:
            continue
        pid = int(m["pid"])
        uses.append(
            LockUse(
                path=str(path),
                kind=m["kind"],
                pid=pid,
                command=_command(pid),
                waiting=bool(m["blocked"]),
            )
        )
    return uses


def incomplete_layers(storage_root: Path = STORAGE_ROOT) -> list[str]:
    """Layers flagged incomplete: a removal or a creation that did not finish."""
    found = []
    for name in ("overlay-layers/layers.json", "overlay-layers/volatile-layers.json"):
        try:
            layers = json.loads((storage_root / name).read_text())
        except (OSError, ValueError):
            continue  # absent, or being rewritten at this moment
        found += [
            str(layer.get("id", "?"))
            for layer in layers or []
            if (layer.get("flags") or {}).get("incomplete")
        ]
    return found


class _Mount(BaseModel):
    id: int
    parent: int
    mountpoint: str
    fstype: str
    source: str


def mounts() -> list[_Mount]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        found.append(
            _Mount(
                id=int(fields[0]),
                parent=int(fields[1]),
                mountpoint=_unescape(fields[4]),
                fstype=tail[0] if tail else "?",
                source=_unescape(tail[1]) if len(tail) > 1 else "?",
            )
        )
    return found


def is_mountpoint(path: Path | str) -> bool:
    """Whether something is mounted on `path` (a bind of a folder onto itself included, which
    `os.path.ismount` cannot see: same device)."""
    return any(m.mountpoint == str(path) for m in mounts())


def hidden_mounts(storage_root: Path = STORAGE_ROOT) -> list[HiddenMount]:
    """Mounts under the store that their own path no longer reaches: a later mount (the
    engine's bind of its overlay home) covers them, so nothing can unmount them by name."""
    table = mounts()
    by_id = {m.id: m for m in table}
    root = str(storage_root)
    hidden = []
    for m in table:
        if not (m.mountpoint == root or m.mountpoint.startswith(root + "/")):
            continue
        reached = _mount_id(m.mountpoint)
        if reached == m.id:
            continue
        top = by_id.get(reached) if reached is not None else None
        if top is not None and top.parent == m.id and top.mountpoint == m.mountpoint:
            continue  # stacked on itself (two binds of the same home): reachable through it
        hidden.append(
            HiddenMount(
                mount_id=m.id,
                mountpoint=m.mountpoint,
                source=f"{m.fstype} {m.source}",
                covered_by=top.mountpoint if top is not None else "a path that is gone",
            )
        )
    return hidden


def cap_mounts(storage_root: Path = STORAGE_ROOT) -> list[str]:
    """Our layer filesystems mounted in their folder now (layerfs.py): each only between its
    container's creation and start."""
    folder = str(storage_root / BACKING_FOLDER) + "/"
    return [m.mountpoint for m in mounts() if m.mountpoint.startswith(folder)]


def leftover_caps(storage_root: Path = STORAGE_ROOT) -> list[str]:
    """Those of `cap_mounts` whose process is gone: left behind."""
    return [
        path
        for path in cap_mounts(storage_root)
        if owner_alive(Path(path).name.rsplit("-", 1)[0]) is not True
    ]


def cap_loop_devices(storage_root: Path = STORAGE_ROOT) -> list[str]:
    """Loop devices backed by our layer files: one per running capped sandbox, none after."""
    folder = str(storage_root / BACKING_FOLDER) + "/"
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            if backing.read_text().startswith(folder):
                found.append(f"/dev/{backing.parent.parent.name}")
        except OSError:
            continue
    return sorted(found)


def _mount_id(path: str) -> int | None:
    """The id of the mount that `path` reaches now (or None when it reaches nothing)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines():
            if line.startswith("mnt_id:"):
                return int(line.split()[1])
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)[:120] or "?"


def _unescape(text: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), text)
