"""The base root filesystem for daemonless sandboxes: a debootstrap minbase, built once per machine.

Images named in `FROM` are mapped onto it (`debian:*`, `ubuntu:*`, `python:3.*`). The mapping is
approximate for anything but Debian bookworm, and says so, so trials can record it in their log.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import re
import shutil
import subprocess
import time
from pathlib import Path

from pydantic import BaseModel

from autoenvscaling.tools.sandbox.base import BuildError, SandboxError
from autoenvscaling.tools.settings import get_settings

log = logging.getLogger(__name__)

# What a terminal task commonly needs offline; the seed pool relies on these.
BASE_PACKAGES = (
    "python3",
    "git",
    "sqlite3",
    "gcc",
    "libc6-dev",
    "make",
    "jq",
    "procps",
    "gawk",
    "bc",
    "file",
    "patch",
    "xz-utils",
    "unzip",
    "zip",
    "less",
    "ca-certificates",
)


class BaseImage(BaseModel):
    """A root filesystem that a `FROM` line resolved to."""

    requested: str
    rootfs: Path
    exact: bool
    note: str


def _apt_mirror() -> str:
    """The Debian mirror this machine's apt already uses (no host names baked into the project)."""
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for source in sources:
        if not source.is_file():
            continue
        text = source.read_text(errors="replace")
        for match in re.finditer(r"(?m)^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text):
            uri = match.group(1)
            if uri.startswith("http") and "security" not in uri:
                return uri
    raise SandboxError(
        "no Debian mirror found in apt's sources; set AUTOENVSCALING_DEBIAN_MIRROR "
        "or point AUTOENVSCALING_BASE_ROOTFS at a ready root filesystem"
    )


def base_rootfs_path() -> Path:
    settings = get_settings()
    if settings.base_rootfs:
        return settings.base_rootfs
    key = hashlib.sha256(" ".join((settings.debian_suite, *BASE_PACKAGES)).encode()).hexdigest()
    return settings.cache_dir / "rootfs" / f"{settings.debian_suite}-{key[:12]}"


def ensure_base_rootfs(progress: bool = True) -> Path:
    """Return the base rootfs, building it with debootstrap (about 80 s) the first time only."""
    target = base_rootfs_path()
    if (target / "etc" / "debian_version").exists() and (
        target.parent / f"{target.name}.ready"
    ).exists():
        return target
    settings = get_settings()
    if settings.base_rootfs:
        raise SandboxError(f"AUTOENVSCALING_BASE_ROOTFS={target} is not a root filesystem")
    if not shutil.which("debootstrap"):
        raise SandboxError("debootstrap is not installed (apt-get install debootstrap)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it right now
        if (target.parent / f"{target.name}.ready").exists():
            return target
        tmp = target.parent / f"{target.name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        mirror = settings.debian_mirror or _apt_mirror()
        if progress:
            log.warning("building the base root filesystem once for this machine (~1-2 min)...")
        started = time.monotonic()
        cmd = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(BASE_PACKAGES)}",
            settings.debian_suite,
            str(tmp),
            mirror,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SandboxError(f"debootstrap failed: {(done.stdout + done.stderr)[-2000:]}")
        # apt inside a user-namespace sandbox cannot drop to _apt; keep it root.
        (tmp / "etc/apt/apt.conf.d/99autoenvscaling").write_text('APT::Sandbox::User "root";\n')
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
        (target.parent / f"{target.name}.ready").write_text(f"{time.monotonic() - started:.1f}\n")
        log.warning("base root filesystem ready in %.0f s", time.monotonic() - started)
    return target


_BASES = [
    (re.compile(r"^(docker\.io/)?(library/)?debian:(bookworm|12)([.-].*)?$"), True, "Debian 12"),
    (re.compile(r"^(docker\.io/)?(library/)?debian(:.*)?$"), False, "another Debian release"),
    (re.compile(r"^(docker\.io/)?(library/)?ubuntu(:.*)?$"), False, "Ubuntu"),
    (
        re.compile(r"^(docker\.io/)?(library/)?python:3(\.\d+)?([.-].*)?$"),
        False,
        "a python:3 image",
    ),
]


def map_base_image(image: str) -> BaseImage:
    """Resolve a `FROM` image onto the local base rootfs, or fail with the supported list."""
    for pattern, exact, what in _BASES:
        if pattern.match(image.strip()):
            note = (
                f"FROM {image}: Debian bookworm minbase"
                if exact
                else f"FROM {image}: approximated by Debian bookworm minbase (stands in for {what}; "
                "python3 is 3.11, no pip packages preinstalled)"
            )
            return BaseImage(requested=image, rootfs=ensure_base_rootfs(), exact=exact, note=note)
    raise BuildError(
        f"FROM {image}: the bwrap backend has no base for this image "
        "(supported: debian:*, ubuntu:*, python:3.*); use the docker backend for other images"
    )
