"""Run a command (`podman build`) in a private mount namespace where the host is read-only.

Defence in depth for image builds, under the text check of `images.refuse_hazards`: a build
step that reaches the host anyway (CVE-2024-1753 binds whatever the builder resolves, `/`
included) finds every file system read-only except what the builder itself must write: its
image store and run folders, its own temp folder, shared memory (locks), the cgroup tree (with
each hierarchy's `release_agent` masked). Mounts are recursive and read-only by `mount_setattr`
(Linux 5.12), made in a namespace of this process only; nothing changes for the host.

Run as a script, with nothing imported but the standard library (it starts for every build):

    python -I -S buildjail.py WRITABLE[:WRITABLE...] -- COMMAND [ARG...]

Exits 125 (what podman uses for its own failures) with a line on stderr if the jail cannot be
made; the caller then knows the build did not run.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys

CLONE_NEWNS = 0x20000
MS_BIND, MS_REC, MS_PRIVATE, MS_RDONLY, MS_REMOUNT = 4096, 0x4000, 1 << 18, 1, 32
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY = 1
SYS_MOUNT_SETATTR = 442  # x86_64 and aarch64 alike (the generic syscall table)
RELEASE_AGENTS = "/sys/fs/cgroup/*/release_agent"

_libc = ctypes.CDLL(None, use_errno=True)


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _ok(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _readonly(path: str, readonly: bool) -> None:
    attr = _MountAttr(MOUNT_ATTR_RDONLY if readonly else 0, 0 if readonly else MOUNT_ATTR_RDONLY)
    _ok(
        _libc.syscall(
            SYS_MOUNT_SETATTR,
            AT_FDCWD,
            path.encode(),
            AT_RECURSIVE,
            ctypes.byref(attr),
            ctypes.sizeof(attr),
        ),
        f"mount_setattr {path}",
    )


def _bind(source: str, target: str, flags: int = 0) -> None:
    _ok(
        _libc.mount(source.encode(), target.encode(), None, MS_BIND | flags, None), f"bind {target}"
    )


def jail(writable: list[str]) -> None:
    """Make this process's mount namespace read-only but for `writable` (existing paths)."""
    _ok(_libc.unshare(CLONE_NEWNS), "unshare")
    _ok(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    kept = [p for p in dict.fromkeys(os.path.realpath(p) for p in writable) if os.path.isdir(p)]
    for path in kept:  # a mount of its own, so its flag can differ from the parent's
        _bind(path, path, MS_REC)
    _readonly("/", True)
    for path in kept:
        _readonly(path, False)
    for agent in glob.glob(RELEASE_AGENTS):  # cgroup v1: a host program run on release
        _bind("/dev/null", agent)
        _ok(
            _libc.mount(None, agent.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY, None),
            f"read-only {agent}",
        )


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: buildjail.py WRITABLE[:WRITABLE...] -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    try:
        jail([p for p in argv[1].split(":") if p])
    except OSError as exc:
        print(
            f"buildjail: cannot make the read-only build namespace: {exc} (needs root and "
            "Linux 5.12+; AUTOENVSCALING_BUILD_JAIL=false builds without it)",
            file=sys.stderr,
        )
        return 125
    os.execv(argv[3], argv[3:])
    return 125  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
