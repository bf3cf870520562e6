"""Machine-level settings, read from the environment (prefix AUTOENVSCALING_) with sane defaults."""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AUTOENVSCALING_", extra="ignore")

    cache_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "autoenvscaling",
        description="Base root filesystems, built layers, model files. Reused across runs.",
    )
    runtime_dir: Path = Field(
        default_factory=lambda: Path(tempfile.gettempdir()) / "autoenvscaling-sandboxes",
        description="Per-sandbox overlay folders (deleted when the sandbox stops).",
    )
    base_rootfs: Path | None = Field(
        None, description="Use this ready root filesystem instead of building one with debootstrap."
    )
    debian_mirror: str | None = Field(
        None,
        description="Debian mirror for debootstrap; default: the first one apt is configured with.",
    )
    debian_suite: str = "bookworm"


@lru_cache
def get_settings() -> Settings:
    return Settings()
