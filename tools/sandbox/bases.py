"""The offline base image: a debootstrap minbase of Debian, imported into the engine once.

`make bases` (part of `make setup`) runs `python -m autoenvscaling.tools.sandbox.bases`: the root
filesystem is debootstrapped once per machine (~1.5-3.5 min, cached), imported as
`autoenvscaling/base:<name>` and tagged as the FROM images the seed pool names, so real
Dockerfiles build with no registry. Where a registry answers, other FROM images pull as usual.
Tests and sandboxes only ever `require_base()`: they never build it.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..one_time import record_one_time_build
from ..settings import get_settings
from .base import Backend, SandboxError
from .cache_lock import CacheLock
from .cleanup import BASE_LABEL, BASE_REPO
from .engine import FIXED_PATH, cli_argv, client, inspect_image
from .image_tags import image_id

log = logging.getLogger(__name__)
Log = Callable[[str], None]

# The bases the seed pool's FROM lines name; `make bases` tags the imported Debian base as each.
SEED_BASE_TAGS = ("debian:bookworm-slim", "python:3.12-slim-bookworm")
DEBOOTSTRAP = "/usr/sbin/debootstrap"
TAR = "/usr/bin/tar"
# What a terminal task commonly needs offline; the seed pool relies on these.
CORE_PACKAGES = (
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
# Professional work (issue 30): spreadsheets (xlsx, ods), word-processor documents, PDFs and
# calendars, read and written from Python or the shell. In the one base, not a second `-office`
# base: measured, they add 80 MB (mostly libicu for libxml2, poppler's libraries, lxml) to the
# 545 MB root filesystem and ~35 s to debootstrap, where a second base costs a whole second
# debootstrap and import (~2.5 min, 625 MB more in the engine, no layer shared) and a FROM name
# no registry has; tasks keep `FROM debian:bookworm-slim`. Left out: pandas (+126 MB with numpy;
# the csv module does the seeds' work) and a headless LibreOffice (calc + writer nogui: 88
# packages, 318 MB); verifiers read documents with these libraries instead.
OFFICE_PACKAGES = (
    "python3-openpyxl",
    "python3-docx",
    "python3-odf",
    "python3-pypdf",
    "python3-icalendar",
    "poppler-utils",
)
# Computer use (issue 30): a display without a screen (Xvfb :99), a small window manager that
# maximises each window (so clicks land where a screenshot shows them), xdotool for keys, text and
# clicks, Pillow for screenshots (ImageGrab reads the X display over XCB and writes PNG; x11-apps'
# xwd drags in man-db, scrot imlib2, imagemagick ~30 MB), Tk for the seeds' GUI apps and tmux for
# full-screen terminal programs. In the one base, as the office packages are: measured on
# 2026-12-04 (2 shared cores, others busy), 86 more packages take the root filesystem from 625 MB
# to 676 MB (+51 MB once Mesa's GL drivers are deleted, SOFTWARE_GL; +210 MB with them) and
# debootstrap from 83 s to 178 s (the 83 s on a quieter machine; `make bases` 215 s in all).
DESKTOP_PACKAGES = (
    "xvfb",
    "xauth",
    "matchbox-window-manager",
    "xdotool",
    "python3-pil",
    "python3-tk",
    "tmux",
)
BASE_PACKAGES = CORE_PACKAGES + OFFICE_PACKAGES + DESKTOP_PACKAGES
# Changes whenever the way the root filesystem is made changes (not only its packages), so the
# cache key, the image tag and every task image built on it move with it.
_RECIPE = "3: apt's downloaded .debs and Mesa's GL drivers deleted"
# Xvfb depends on libgl1, which pulls Mesa's DRI drivers and through them LLVM and Z3: 162 MB of
# the desktop's 210 MB, for OpenGL inside the virtual display, which no seed needs (Xvfb, Tk,
# xdotool and Pillow's screenshots run without them: Xvfb starts without its GLX renderer).
# Deleted after debootstrap; a task that wants OpenGL runs
# `apt-get install --reinstall libgl1-mesa-dri libllvm15 libz3-4` (needs a network).
SOFTWARE_GL = (
    "usr/lib/*-linux-gnu/dri/*.so",
    "usr/lib/*-linux-gnu/libLLVM-15.so*",
    "usr/lib/*-linux-gnu/libz3.so*",
)


class BaseImageMissingError(SandboxError):
    """The project's base image is not in the engine. Run `make bases`."""


def _apt_mirror() -> str:
    """The Debian mirror this machine's apt already uses (no host names baked into the project)."""
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for source in sources:
        if not source.is_file():
            continue
        text = source.read_text(errors="replace")
        for match in re.finditer(r"(?m)^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text):
            uri = match.group(1)
            if uri.startswith("http") and "security" not in uri and "debian" in uri:
                return uri
    raise SandboxError(
        "no Debian mirror found in apt's sources; set AUTOENVSCALING_DEBIAN_MIRROR "
        "or point AUTOENVSCALING_BASE_ROOTFS at a ready root filesystem"
    )


def base_rootfs_path() -> Path:
    settings = get_settings()
    if settings.base_rootfs:
        return settings.base_rootfs
    recipe = " ".join((_RECIPE, settings.debian_suite, *BASE_PACKAGES))
    key = hashlib.sha256(recipe.encode()).hexdigest()
    return settings.cache_dir / "rootfs" / f"{settings.debian_suite}-{key[:12]}"


def ensure_base_rootfs(say: Log = log.warning) -> Path:
    """Return the base rootfs, building it with debootstrap (85-180 s) the first time only."""
    target = base_rootfs_path()
    ready = target.parent / f"{target.name}.ready"
    if (target / "etc" / "debian_version").exists() and ready.exists():
        return target
    settings = get_settings()
    if settings.base_rootfs:
        raise SandboxError(f"AUTOENVSCALING_BASE_ROOTFS={target} is not a root filesystem")
    if not Path(DEBOOTSTRAP).exists():
        raise SandboxError(f"{DEBOOTSTRAP} is missing (apt-get install debootstrap)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it right now
        if ready.exists():
            return target
        tmp = target.parent / f"{target.name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        mirror = settings.debian_mirror or _apt_mirror()
        say("building the base root filesystem once for this machine (~1.5-3.5 min)...")
        started = time.monotonic()
        cmd = [
            DEBOOTSTRAP,
            "--variant=minbase",
            f"--include={','.join(BASE_PACKAGES)}",
            settings.debian_suite,
            str(tmp),
            mirror,
        ]
        done = subprocess.run(
            cmd, capture_output=True, text=True, env={"PATH": FIXED_PATH, "LANG": "C.UTF-8"}
        )
        if done.returncode != 0:
            raise SandboxError(f"debootstrap failed: {(done.stdout + done.stderr)[-2000:]}")
        # The .debs debootstrap downloaded are installed already: 110-130 MB nobody reads offline.
        for deb in (tmp / "var/cache/apt/archives").glob("*.deb"):
            deb.unlink()
        for pattern in SOFTWARE_GL:
            for path in tmp.glob(pattern):
                path.unlink()
        # apt in a container without CAP_SETPCAP-style sandboxing: keep its downloads as root.
        (tmp / "etc/apt/apt.conf.d/99autoenvscaling").write_text('APT::Sandbox::User "root";\n')
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
        ready.write_text(f"{time.monotonic() - started:.1f}\n")
        record_one_time_build(f"the base root filesystem ({ready})")
        say(f"base root filesystem ready in {time.monotonic() - started:.0f} s")
    return target


def base_image_tag() -> str:
    """The tag of the project's Debian base image."""
    return f"{BASE_REPO}:{base_rootfs_path().name}"


def _ours(api: Any, name: str) -> bool:
    """Whether `name` is a base this project imported (an older recipe's: then it is retagged)."""
    labels = (inspect_image(api, name).get("Config") or {}).get("Labels") or {}
    return BASE_LABEL in labels


def require_base(backend: Backend = "podman") -> str:
    """The base image's tag, if the engine has it and the seed pool's FROM images; else a clear
    error (never builds or imports anything)."""
    tag = base_image_tag()
    api = client(backend).api
    missing = [t for t in (tag, *SEED_BASE_TAGS) if image_id(api, t) is None]
    if missing:
        raise BaseImageMissingError(
            f"{', '.join(missing)}: not in the {backend} engine: run `make bases` once "
            f"(python -m autoenvscaling.tools.sandbox.bases --engine {backend})"
        )
    return tag


def _import(backend: Backend, rootfs: Path, base: str, say: Log) -> None:
    changes = [
        f"ENV PATH={FIXED_PATH}",
        "ENV LANG=C.UTF-8",
        f"LABEL {BASE_LABEL}={rootfs.name}",
        'CMD ["bash"]',
    ]
    argv, env = cli_argv(backend)
    cmd = [*argv, "import"]
    for change in changes:
        cmd += ["--change", change]
    cmd += ["-", base]
    say(f"importing {rootfs} as {base}")
    tar = subprocess.Popen(
        [TAR, "--numeric-owner", "-C", str(rootfs), "-cf", "-", "."],
        stdout=subprocess.PIPE,
        env={"PATH": FIXED_PATH},
    )
    done = subprocess.run(cmd, stdin=tar.stdout, capture_output=True, text=True, env=env)
    if tar.stdout is not None:
        tar.stdout.close()
    tar.wait()
    if done.returncode != 0 or tar.returncode != 0:
        raise SandboxError(f"could not import the base rootfs: {done.stderr[-1000:]}")


def ensure_base_image(
    tags: Sequence[str] = SEED_BASE_TAGS,
    *,
    backend: Backend = "podman",
    replace: bool = False,
    log: Log | None = None,
) -> list[str]:
    """Import the base rootfs as `autoenvscaling/base:<name>` (once) and tag it as `tags`.

    A tag that already names an image we did not import is left alone unless `replace`.
    Returns the tags that now name the base.
    """
    say = log or (lambda _msg: None)
    api = client(backend).api
    base = base_image_tag()
    with CacheLock(f"base-import-{backend}"):
        base_id = image_id(api, base)
        if base_id is None:
            _import(backend, ensure_base_rootfs(say), base, say)
            base_id = image_id(api, base)
            if base_id is None:
                raise SandboxError(f"imported {base} but the engine does not list it")
        done = [base]
        for tag in tags:
            current = image_id(api, tag)
            if current is not None and current != base_id and not replace and not _ours(api, tag):
                say(f"{tag} already names another image; left alone")
                continue
            if current != base_id:
                repo, _, name = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "")
                api.tag(base_id, repo, name or "latest", force=True)
            done.append(tag)
    return done


def main(argv: list[str] | None = None) -> int:
    """`python -m autoenvscaling.tools.sandbox.bases [--engine podman|docker] [TAG...]`"""
    args = list(sys.argv[1:] if argv is None else argv)
    backend: Backend = "podman"
    if args[:1] == ["--engine"] and len(args) >= 2:
        if args[1] not in ("podman", "docker"):
            print(main.__doc__)
            return 2
        backend = "docker" if args[1] == "docker" else "podman"
        args = args[2:]
    if any(a.startswith("-") for a in args):
        print(main.__doc__)
        return 2
    started = time.monotonic()
    tags = ensure_base_image(args or SEED_BASE_TAGS, backend=backend, log=print)
    print(f"base image on {backend}: {', '.join(tags)} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
