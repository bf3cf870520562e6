"""The one hardened profile every container and every build gets, on either engine.

- no network (`none`), for builds too;
- capabilities cut to what package installs and ordinary task scripts need (`CAPS`): file
  ownership and permission bits (CHOWN, DAC_OVERRIDE, FOWNER, FSETID), switching users
  (SETUID, SETGID: apt drops to `_apt`, `su`, `runuser`), KILL (signals to other users'
  processes), NET_BIND_SERVICE (a task's service on port 80 of its own loopback), SYS_CHROOT
  (`chroot` in maintainer scripts), AUDIT_WRITE (PAM in `su`/`login`). Left out of Docker's
  default set: NET_RAW (packet sniffing, spoofing), MKNOD (device nodes), SETPCAP, SETFCAP;
  never SYS_ADMIN, SYS_PTRACE, or any other.
- `no-new-privileges` (setuid binaries cannot gain what the caller lacks);
- seccomp: the engine's default profile minus the kernel keyring calls (keyctl, add_key,
  request_key): rootful podman's default allows keyctl, and the keyring is not namespaced, so
  container root could read or plant keys in the host root's keyring;
- resource limits from the task clamped to the configured maxima (CPUs to this machine's too);
- environment: only what the image and the caller set (the engine adds PATH/TERM/HOSTNAME);
- no host path bound except those a caller names (`binds`): podman mounts them nosuid,nodev,
  and with a folder bound no setuid/setgid bit can be set (seccomp on the mode argument of
  chmod/open/mknod and kin), so nothing privilege-bearing lands on the host.

Builds: podman builds (the CLI) get the same network, capabilities and seccomp profile; podman
refuses `no-new-privileges` for builds. docker's build API takes no capability or seccomp options:
docker builds get `--network none` and the daemon's defaults.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..files.whole import write_whole
from ..settings import get_settings
from .base import Backend, SandboxLimits
from .engine import config_dir

#: The capabilities every container and (podman) build keeps, with their kernel bit numbers.
CAP_BITS = {
    "CHOWN": 0,
    "DAC_OVERRIDE": 1,
    "FOWNER": 3,
    "FSETID": 4,
    "KILL": 5,
    "SETGID": 6,
    "SETUID": 7,
    "NET_BIND_SERVICE": 10,
    "SYS_CHROOT": 18,
    "AUDIT_WRITE": 29,
}
CAPS = tuple(CAP_BITS)
KEYRING_CALLS = ("keyctl", "add_key", "request_key")
ENGINE_SECCOMP = Path("/usr/share/containers/seccomp.json")  # containers-common, podman's default
EPERM = 1


#: (syscall, index of its mode argument): the calls that set a file's mode. A sandbox with a
#: host folder bound in may call them only without the setuid/setgid bits (`bound=True`).
MODE_CALLS = {
    "chmod": 1,
    "fchmod": 1,
    "creat": 1,
    "mknod": 1,
    "fchmodat": 2,
    "open": 2,
    "mknodat": 2,
    "openat": 3,
}
SETID_BITS = 0o6000
#: openat2 takes its mode inside a struct seccomp cannot read: ENOSYS (libc falls back to openat).
OPAQUE_MODE_CALLS = ("openat2",)


def _no_setid(profile: dict[str, Any]) -> None:
    """Allow the mode-setting calls only when the mode has no setuid/setgid bit."""
    for rule in profile.get("syscalls", []):
        if rule.get("action") == "SCMP_ACT_ALLOW" and not rule.get("args"):
            drop = set(MODE_CALLS) | set(OPAQUE_MODE_CALLS)
            rule["names"] = [n for n in rule.get("names", []) if n not in drop]
    for name, index in MODE_CALLS.items():
        profile["syscalls"].append(
            {
                "names": [name],
                "action": "SCMP_ACT_ALLOW",
                # MASKED_EQ: (arg & value) == valueTwo
                "args": [
                    {"index": index, "value": SETID_BITS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
                ],
            }
        )


#: fallocate reserves any size at once, faster than a measured cap can see: a sandbox gets
#: EOPNOTSUPP (libc's posix_fallocate then writes the bytes, at the speed the cap measures).
#: Builds keep it (package installs, measured by nothing).
RESERVING_CALLS = ("fallocate",)
EOPNOTSUPP = 95


def seccomp_profile(*, run: bool = False, bound: bool = False) -> Path:
    """Our seccomp profile (json, in our config folder): the engine's default minus the keyring;
    `run` (a sandbox, not a build): no fallocate; `bound` (a host folder is bound in): no
    setuid/setgid bit can be set either."""
    try:
        base = json.loads(ENGINE_SECCOMP.read_text())
    except (OSError, ValueError) as exc:
        raise RuntimeError(
            f"{ENGINE_SECCOMP} (the engine's default seccomp profile) is unreadable: {exc}; "
            "apt-get install containers-common (podman depends on it)"
        ) from exc
    for rule in base.get("syscalls", []):
        if rule.get("action") == "SCMP_ACT_ALLOW":
            rule["names"] = [n for n in rule.get("names", []) if n not in KEYRING_CALLS]
    base["syscalls"] = [r for r in base.get("syscalls", []) if r.get("names")]
    base["syscalls"].append(
        {"names": list(KEYRING_CALLS), "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM, "args": []}
    )
    if run or bound:
        for rule in base["syscalls"]:
            if rule.get("action") == "SCMP_ACT_ALLOW":
                rule["names"] = [n for n in rule["names"] if n not in RESERVING_CALLS]
        base["syscalls"] = [r for r in base["syscalls"] if r.get("names")]
        base["syscalls"].append(
            {
                "names": list(RESERVING_CALLS),
                "action": "SCMP_ACT_ERRNO",
                "errnoRet": EOPNOTSUPP,
                "args": [],
            }
        )
    if bound:
        _no_setid(base)
    name = "seccomp-bound.json" if bound else "seccomp-run.json" if run else "seccomp.json"
    text = json.dumps(base, indent=1, sort_keys=True)
    path = config_dir() / name
    if not path.exists() or path.read_text() != text:
        write_whole(path, text)
    return path


def security_opt(backend: Backend, *, bound: bool = False) -> list[str]:
    """`--security-opt` values for containers: docker's API wants the profile's json, podman's
    a path to it."""
    path = seccomp_profile(run=True, bound=bound)
    return ["no-new-privileges", f"seccomp={path if backend == 'podman' else path.read_text()}"]


def build_flags() -> list[str]:
    """The same profile as `podman build` flags (network none is set by the caller)."""
    flags = ["--cap-drop", "ALL"]
    for cap in CAPS:
        flags += ["--cap-add", cap]
    flags += ["--security-opt", f"seccomp={seccomp_profile()}"]
    return flags


def clamp(limits: SandboxLimits) -> SandboxLimits:
    """`limits` with each value cut to the configured maximum (and CPUs to this machine's)."""
    settings = get_settings()
    cpus = float(os.cpu_count() or 1)
    if settings.max_cpus:
        cpus = min(cpus, settings.max_cpus)
    return limits.model_copy(
        update={
            "memory_mb": min(limits.memory_mb or settings.max_memory_mb, settings.max_memory_mb),
            "pids": min(limits.pids or settings.max_pids, settings.max_pids),
            "cpus": min(limits.cpus, cpus) if limits.cpus else None,
            "disk_mb": min(limits.disk_mb or settings.max_disk_mb, settings.max_disk_mb),
        }
    )


def _bind_mode(backend: Backend) -> str:
    """podman: nothing setuid or a device node in a bound folder works inside; docker's bind
    API takes no such options (the seccomp rule and the strip on close still hold there)."""
    return "rw,nosuid,nodev" if backend == "podman" else "rw"


def host_config(
    api: Any,
    backend: Backend,
    limits: SandboxLimits,
    *,
    binds: list[tuple[Path, str]] | None = None,
) -> dict[str, Any]:
    """The HostConfig of every sandbox container (limits already clamped)."""
    mem = f"{limits.memory_mb}m" if limits.memory_mb else None
    return api.create_host_config(
        network_mode="none",
        init=True,
        auto_remove=True,
        mem_limit=mem,
        memswap_limit=mem,  # no swap: the limit is the limit
        pids_limit=limits.pids,
        nano_cpus=int(limits.cpus * 1e9) if limits.cpus else None,
        cap_drop=["ALL"],
        cap_add=list(CAPS),
        security_opt=security_opt(backend, bound=bool(binds)),
        binds={
            str(Path(h).resolve()): {"bind": c, "mode": _bind_mode(backend)} for h, c in binds or []
        },
        # docker's archive API (upload/download) cannot reach into a tmpfs mount (moby#22020):
        # there /logs stays in the writable layer, under that layer's cap.
        tmpfs={LOGS: logs_tmpfs()} if backend == "podman" else None,
        ulimits=None,
    )


#: Harbor's log folder (agent and verifier logs, the reward, artifacts).
LOGS = "/logs"


def logs_tmpfs() -> str:
    """/logs is a tmpfs of `max_download_mb` (no more can be downloaded from it anyway): its
    bytes stop at the size, its files and pages count against the sandbox's memory limit (tmpfs
    inodes are memory-accounted; podman 4.3 refuses `nr_inodes`), and nothing written there
    reaches the host's disk."""
    return f"rw,nosuid,nodev,size={get_settings().max_download_mb}m,mode=0755"
