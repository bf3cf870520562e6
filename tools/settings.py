"""Machine-level settings, read from the environment (prefix AUTOENVSCALING_) with sane defaults."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from .sandbox.base import Backend, RuntimeSetting


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AUTOENVSCALING_", extra="ignore")

    cache_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "autoenvscaling",
        description="Base root filesystems, built layers, model files. Reused across runs.",
    )
    base_rootfs: Path | None = Field(
        default=None,
        description="Use this ready root filesystem instead of building one with debootstrap.",
    )
    debian_mirror: str | None = Field(
        default=None,
        description="Debian mirror for debootstrap; default: the first one apt is configured with.",
    )
    debian_suite: str = "bookworm"
    engine: Backend = Field(
        default="podman",
        description="Container engine when none is named: podman (ours) or docker.",
    )
    sandbox_runtime: RuntimeSetting = Field(
        default="auto",
        description="OCI runtime of podman sandboxes: auto (runsc where it is installed and "
        "passes the self-check, else runc, saying why), runc (the host's kernel) or runsc "
        "(gVisor's user-space kernel; fails at start if it cannot run a sandbox). "
        "tools/sandbox/runtimes.py says what differs.",
    )
    max_memory_mb: int = Field(default=8192, description="No sandbox gets more memory than this.")
    max_pids: int = Field(default=4096, description="No sandbox runs more processes at once.")
    max_cpus: float | None = Field(
        default=None, description="No sandbox gets more CPUs (and never more than the machine has)."
    )
    max_disk_mb: int = Field(default=4096, description="Cap on a sandbox's writable layer.")
    max_download_mb: int = Field(
        default=512, description="Cap on one download (logs, artifacts) from a sandbox."
    )
    task_env_allow: list[str] = Field(
        default_factory=list,
        description="Host environment variables a task.toml `${VAR}` template may read (json "
        'list, e.g. ["HF_HOME"]); any other template is refused by lint and at sandbox start, '
        "so no host value (an API key) enters a sandbox unless named here.",
    )
    train_shared_verifier: bool = Field(
        default=False,
        description="Train on shared-verifier tasks whose agent runs as root (it can replace "
        "what the tests run and forge 1.0): off, they are left out of GRPO jobs and named.",
    )
    build_jail: bool = Field(
        default=True,
        description="podman builds run in a private mount namespace where the host is read-only "
        "but for the image store (tools/sandbox/buildjail.py; root, Linux 5.12+). Off only where "
        "the kernel lacks mount_setattr: builds then rely on the Dockerfile text check alone.",
    )
    control_channel: bool = Field(
        default=False,
        description="Harbor trials serve root execs through one long-lived bash per container "
        "(sandbox/control.py; opt-in until the whole suite has run with it); off: every exec "
        "is a fresh engine exec.",
    )


@lru_cache
def get_settings() -> Settings:
    return Settings()
