"""The OCI runtime a podman sandbox runs under: runc (the host's kernel) or runsc (gVisor).

runc shares the host's kernel with the agent: every kernel bug is a way out. runsc puts gVisor's
user-space kernel (its "Sentry"; `uname -r` says 4.4.0 inside) between the agent and the host.
Which one is used is `AUTOENVSCALING_SANDBOX_RUNTIME`: `auto` (the default: runsc where it is
installed and passes a self-check, else runc, saying why), `runc`, or `runsc`. `doctor` reports
the choice and its reason. The self-check runs once per machine and runsc binary (its passing
result is kept in the cache folder); on this project's machines it keeps runc, because trixie's
runsc ends a sandbox that runs a dozen tmux clients (below).

How a runtime reaches a container: podman's Docker-compatible API ignores `HostConfig.Runtime`
(measured with podman 4.3: the container ran under runc), and containers.conf has no per-runtime
flags. So a runtime is a set of global flags of the `podman system service` that creates the
container (`service_flags`); engine.py keeps one service per set. runc's set is empty: with the
default runtime nothing about a sandbox changes. Execs, the persistent shell and removal go to
any service: podman finds the runtime a container was created with by its recorded path.

What runsc needs, measured here (podman 4.3.1; runsc 0.0~20240729.0, Debian trixie's, which
`make system` installs pinned, tools/sandbox/install-runsc.sh; first with bookworm's 0.0~20221219):
- no network: `--runtime-flag network=none` (gVisor's own stack, loopback only). Without a flag
  runsc refuses to start ("cannot run with network enabled in root network namespace"), for
  `--network none` and for slirp4netns alike;
- a task granted the internet (slirp4netns, netns.py): `network=host`, i.e. the Sentry's sockets
  are host sockets *inside the slirp namespace* (which still has no route to the host's loopback);
  `network=none` there leaves the sandbox with loopback only.

What differs under runsc (tests/test_sandbox_runtimes.py holds each one):
- podman's copier cannot reach gVisor's root (uploads fail "read-only file system", downloads
  find nothing): files go through `tar` in an exec instead (exec_archive.py);
- the sandbox's processes are the Sentry's, not host processes: nothing can find or signal them
  from the host, so timeouts kill through an exec inside (`host_processes` False) and a shared
  verifier's host-side quiesce refuses (fails closed);
- pids: the host limit is scaled (`host_pids`) since the Sentry's threads count against it, and a
  sandbox that reaches it ends as a whole instead of seeing fork fail (runc);
- memory holds (the Sentry and its tmpfs pages are charged to the container's cgroup), but a
  process past it ends the whole sandbox (runc: that process is OOM-killed, the sandbox lives);
- the writable layer's cap holds, except /tmp: runsc mounts a tmpfs of its own there, bounded
  by the memory limit instead. 0.0~20221219 wrote the host's overlay through the gofer (`/` is
  9p inside); 0.0~20240729 wraps `/` in an overlay of its own (`--overlay2 root:self`, its
  default) whose file data goes to one `.gvisor.filestore.<id>` file in the container's root, on
  the layer's ext4: the cap holds the same, and a file written inside is not seen from the host;
- bookworm's runsc 0.0~20221219 rejects statx with AT_NO_AUTOMOUNT: bookworm's `ls` and `stat`
  fail with "Invalid argument", and with `stat` the control channel (control.py) cannot open.
  trixie's 0.0~20240729 does not. The self-check still runs `ls` and `stat`, so `auto` keeps
  runc where an older runsc is found;
- runsc 0.0~20240729 grows a process's descriptor table to the number it closes (its heap
  profile: `FDTable.set` under `close`); every tmux client closes 0x7fffffff and leaves ~33 MB in
  the Sentry that is never given back. A task that drives tmux (tasks/seed/tmux-editor-settings:
  ~50 tmux calls in its oracle) runs the sandbox past its memory limit and the whole sandbox
  ends (above): its oracle scores 0 under runsc;
- a process start costs ~30-45 ms under runsc against ~1.5-2 ms under runc (`/bin/true` in a
  loop, load 11-14): a verifier that times whole processes against a reference sees a smaller
  speed-up (tasks/seed/histogram-edges-c: 3.0-3.3x where it asks for 5x, in some runs);
- the seccomp profile (profile.py) holds only for the container's first process, not for execs
  (every command of ours): no keyring call reaches the host's kernel anyway (the Sentry has none),
  but a setuid bit written into a bound host folder would reach the host through the gofer
  (tests/security/test_runtimes.py showed setuid-root bash there). So a sandbox with a host
  folder bound in (the proposer's workspace) runs under runc (`for_sandbox`), and so does one
  whose layer got no filesystem of its own (container.py): the measured cap relies on the
  profile refusing fallocate, and a runsc exec reserved 6 GiB of host disk before it looked;
- the files of `/` are entries in the Sentry's memory (their data in the filestore on the
  layer's ext4): a flood of empty files ends at the memory limit, not at the inode count;
- builds stay on the engine's builder (buildah, runc): a Dockerfile's RUN steps run on the host's
  kernel under the build profile (profile.build_flags, buildjail.py), not under gVisor.
"""

from __future__ import annotations

import functools
import os
import subprocess

from pydantic import BaseModel

from ..files.whole import write_whole
from ..settings import get_settings
from .base import Backend, RuntimeName, RuntimeSetting, SandboxError

RUNSC = "/usr/bin/runsc"
#: What gVisor's Sentry reports as its kernel release.
GVISOR_RELEASE = "4.4.0"
SELF_CHECK_SEC = 60.0
#: runsc gives every guest process host threads and a stub process, all charged to the
#: container's pids cgroup. Measured here on ptrace (0.0~20221219's default): ~59 host pids for an
#: idle sandbox and ~9.5 more per `sleep` started in it (10 sleeps: 154; 50 more: 550); on systrap
#: (0.0~20240729's default) ~36 and ~2.6 (10 sleeps: 62). The scale keeps room for ptrace.
HOST_PIDS_PER_PROCESS = 10
SENTRY_PIDS = 128


class Runtime(BaseModel, frozen=True):
    """One OCI runtime: how podman's service is told to use it, and what it changes."""

    name: RuntimeName
    binary: str
    #: podman's global flags for a container without a network (None: the engine's default).
    flags_offline: tuple[str, ...]
    #: ... and for one on slirp4netns (a task granted the internet).
    flags_network: tuple[str, ...]
    #: The container's processes are host processes (found and signalled through /proc).
    host_processes: bool
    #: The seccomp profile holds for exec'd processes too (every command of ours is an exec).
    seccomp_in_exec: bool
    #: The engine's archive API reaches the container's root (else `exec tar`, exec_archive.py).
    engine_copies: bool

    def service_flags(self, network: bool) -> tuple[str, ...]:
        return self.flags_network if network else self.flags_offline

    def host_pids(self, pids: int | None) -> int | None:
        """The host pids limit that lets `pids` processes run in the sandbox. runsc: scaled for
        the Sentry's host threads; at the limit the Sentry cannot make a thread and the whole
        sandbox ends (runc: fork fails with EAGAIN and the sandbox lives)."""
        if self.host_processes or not pids:
            return pids
        return pids * HOST_PIDS_PER_PROCESS + SENTRY_PIDS


#: `oci-seccomp`: without it runsc ignores the container's seccomp profile (profile.py). With it
#: the profile holds for the container's first process tree only, not for exec'd processes
#: (measured: fallocate refused in the init, allowed in `podman exec`).
_RUNSC = ("--runtime", RUNSC, "--runtime-flag", "oci-seccomp")

RUNTIMES: dict[RuntimeName, Runtime] = {
    "runc": Runtime(
        name="runc",
        binary="/usr/sbin/runc",
        flags_offline=(),
        flags_network=(),
        host_processes=True,
        seccomp_in_exec=True,
        engine_copies=True,
    ),
    "runsc": Runtime(
        name="runsc",
        binary=RUNSC,
        flags_offline=(*_RUNSC, "--runtime-flag", "network=none"),
        flags_network=(*_RUNSC, "--runtime-flag", "network=host"),
        host_processes=False,
        seccomp_in_exec=False,
        engine_copies=False,
    ),
}


class Choice(BaseModel, frozen=True):
    """The runtime in use and why (doctor prints both)."""

    runtime: RuntimeName
    reason: str

    @property
    def spec(self) -> Runtime:
        return RUNTIMES[self.runtime]


class RuntimeUnavailableError(SandboxError):
    """runsc was asked for and cannot run a sandbox here; the message says why."""


#: Run in the self-check's container: the kernel, then what every task's scripts lean on, one
#: line of error for each that fails. bookworm's runsc 0.0~20221219 rejects statx with
#: AT_NO_AUTOMOUNT, which bookworm's coreutils pass: `ls` and `stat` fail with "Invalid argument"
#: (measured; the control channel needs `stat`). trixie's, which `make system` installs, does not,
#: but keeps ~33 MB for every tmux client (above): TMUX_CLIENTS of them end a sandbox of
#: SELF_CHECK_MEMORY_MB (measured: in 1.6 s, exit 137), which runc does not notice. tmux drives
#: terminal agents (Terminal-Bench's own harness runs the agent in a tmux session).
TMUX_CLIENTS = 12
SELF_CHECK_MEMORY_MB = 256
TMUX_STARTED, TMUX_DONE = "aes-tmux-started", "aes-tmux-done"
PROBE = (
    "uname -r; for c in 'ls /' 'stat /etc/hostname'; do "
    "$c >/dev/null 2>&1 || $c 2>&1 >/dev/null | head -n 1; done; "
    "command -v tmux >/dev/null && tmux new-session -d -s aes 'sleep 60' && "
    f"echo {TMUX_STARTED} && for i in $(seq {TMUX_CLIENTS}); do tmux ls >/dev/null || break; done "
    f"&& echo {TMUX_DONE}"
)
TMUX_PROBLEM = (
    f"{TMUX_CLIENTS} tmux clients ran a {SELF_CHECK_MEMORY_MB} MB sandbox out of memory (this "
    "runsc keeps ~33 MB for each: tmux-driven tasks and agents fail)"
)


@functools.cache
def runsc_version() -> str:
    """`runsc --version`'s version (e.g. 0.0~20240729.0), or "" where it cannot say."""
    try:
        out = subprocess.run([RUNSC, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    first = out.stdout.splitlines()[0] if out.stdout.strip() else ""
    return first.removeprefix("runsc version ").strip()


class SelfCheck(BaseModel, frozen=True):
    """What one tiny container under runsc showed."""

    #: Why runsc cannot start a sandbox here (None: it can, and its kernel is gVisor's).
    broken: str | None = None
    #: What works differently from runc inside (a task's tools failing), one line each.
    problems: tuple[str, ...] = ()


def self_check(image: str | None = None) -> SelfCheck:
    """What runsc does here: the one passing result kept for this machine and runsc binary, else
    a tiny container started under runsc (`check_now`). A failed start is never kept."""
    try:
        made = os.stat(RUNSC)
    except OSError:
        return SelfCheck(broken=f"{RUNSC} is not installed (apt-get install runsc; `make system`)")
    key = f"{runsc_version()} {made.st_size} {made.st_mtime_ns} {image or ''}"
    kept = get_settings().cache_dir / "runsc-self-check.json"
    try:
        stored = KeptCheck.model_validate_json(kept.read_text())
        if stored.key == key:
            return stored.check
    except (OSError, ValueError):
        pass
    check = check_now(image)
    if check.broken is None:
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            write_whole(kept, KeptCheck(key=key, check=check).model_dump_json())
        except OSError:
            pass  # a read-only cache: the check runs again next time
    return check


class KeptCheck(BaseModel, frozen=True):
    """A passing self-check and the runsc binary (version, size, mtime) and image it was for."""

    key: str
    check: SelfCheck


def check_now(image: str | None = None) -> SelfCheck:
    """Start a tiny container under runsc: its kernel release, `ls`, `stat` and tmux clients."""
    # lazy: import circle (engine.py and, through it, bases.py and cleanup.py read the runtime
    # registry here)
    from .bases import SEED_BASE_TAGS
    from .cleanup import labels
    from .engine import PODMAN, podman_env

    label = [f"--label={k}={v}" for k, v in labels().items()]
    argv = [PODMAN, *RUNTIMES["runsc"].flags_offline, "run", "--rm", "--network", "none"]
    argv += ["--memory", f"{SELF_CHECK_MEMORY_MB}m"]
    argv += [*label, image or SEED_BASE_TAGS[0], "sh", "-c", PROBE]
    try:
        done = subprocess.run(
            argv, env=podman_env(), capture_output=True, text=True, timeout=SELF_CHECK_SEC
        )
    except subprocess.TimeoutExpired:
        return SelfCheck(broken=f"the runsc self-check did not finish in {SELF_CHECK_SEC:g} s")
    lines = [line.strip() for line in done.stdout.strip().splitlines() if line.strip()]
    release = lines[0] if lines else ""
    tmux_failed = TMUX_STARTED in lines and TMUX_DONE not in lines
    if release != GVISOR_RELEASE or (done.returncode != 0 and not tmux_failed):
        why = (done.stderr.strip() or release or "no output")[-400:]
        return SelfCheck(broken=f"the runsc self-check failed (exit {done.returncode}): {why}")
    problems = [line for line in lines[1:] if line not in (TMUX_STARTED, TMUX_DONE)]
    return SelfCheck(problems=(*problems, *([TMUX_PROBLEM] if tmux_failed else [])))


@functools.cache
def _choose(setting: RuntimeSetting) -> Choice:
    if setting == "runc":
        return Choice(runtime="runc", reason="AUTOENVSCALING_SANDBOX_RUNTIME=runc")
    check = self_check()
    if check.broken is not None:
        if setting == "runsc":
            raise RuntimeUnavailableError(
                "AUTOENVSCALING_SANDBOX_RUNTIME=runsc, but runsc cannot run a sandbox here: "
                + check.broken
            )
        return Choice(runtime="runc", reason=f"auto: runsc not used: {check.broken}")
    problems = "; ".join(check.problems)
    runsc = f"runsc {runsc_version() or '(version unknown)'}"
    if setting == "auto" and problems:
        return Choice(
            runtime="runc",
            reason=f"auto: {runsc} starts (gVisor's kernel {GVISOR_RELEASE}) but breaks task "
            f"tools: {problems}",
        )
    return Choice(
        runtime="runsc",
        reason=f"AUTOENVSCALING_SANDBOX_RUNTIME={setting}; {runsc} passed the self-check "
        f"(gVisor's kernel {GVISOR_RELEASE} inside, `ls`, `stat` and tmux work)"
        if not problems
        else f"AUTOENVSCALING_SANDBOX_RUNTIME={setting}; {runsc} starts (gVisor's kernel "
        f"{GVISOR_RELEASE} inside); WARNING, breaks task tools: {problems}",
    )


def choice(backend: Backend = "podman") -> Choice:
    """The runtime sandboxes on `backend` run under (checked once per process and setting).
    docker runs its daemon's runtime: nothing here chooses it."""
    if backend != "podman":
        return Choice(
            runtime="runc", reason=f"the {backend} daemon's own runtime (not chosen here)"
        )
    return _choose(get_settings().sandbox_runtime)


def for_sandbox(backend: Backend, *, bound: bool) -> Runtime:
    """The runtime one sandbox starts under: the chosen one, except runc for a sandbox with a
    host folder bound in when the chosen one cannot keep setuid bits out of it."""
    spec = choice(backend).spec
    return RUNTIMES["runc"] if bound and not spec.seccomp_in_exec else spec


def service_flags(backend: Backend, network: bool) -> tuple[str, ...]:
    """The podman service flags a new sandbox on `backend` is created through (() for runc)."""
    return choice(backend).spec.service_flags(network) if backend == "podman" else ()
