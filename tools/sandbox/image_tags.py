"""A task image's name, and what the engine holds under a name.

`image_tag` is `autoenvscaling/<task>:<hash>`, the hash covering the environment's files and the
ids of its FROM images: an unchanged task keeps its tag (so its image is never rebuilt), a
changed task or a re-imported base gets a new one. `image_id` is the id the engine has under a
name, None when it has none (podman and docker say "no such image" differently).
`missing_hint` tells a failed build how to import a FROM image the engine lacks.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import docker.errors
from harbor.environments.definition import environment_content_hash

from ..tasks.dockerfile import Dockerfile, DockerfileError
from .base import Backend
from .cleanup import IMAGE_REPO
from .engine import client, inspect_image


def _repo_name(task_name: str) -> str:
    name = re.sub(r"[^a-z0-9._-]", "-", task_name.lower()).strip(".-_") or "task"
    return f"{IMAGE_REPO}/{name[:100]}"


def parent_images(dockerfile: Path) -> list[str]:
    """The FROM images of a Dockerfile; none when it cannot be read."""
    try:
        return Dockerfile.read(dockerfile).base_images()
    except DockerfileError:
        return []  # the build itself fails on an unreadable Dockerfile and says why


def image_id(api: Any, name: str) -> str | None:
    """The id of the image the engine has under `name`, or None."""
    try:
        return str(inspect_image(api, name)["Id"])
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:  # podman: "no such image" with other codes
        if "no such image" in str(exc).lower() or "not known" in str(exc).lower():
            return None
        raise


def image_tag(task_name: str, environment_dir: Path, backend: Backend = "podman") -> str:
    """`autoenvscaling/<task>:<hash>` of the environment's files and of the FROM images' ids."""
    digest = hashlib.sha256(environment_content_hash(environment_dir, truncate=64).encode())
    dockerfile = environment_dir / "Dockerfile"
    if dockerfile.exists():
        api = client(backend).api
        for parent in parent_images(dockerfile):
            digest.update((image_id(api, parent) or parent).encode())
    return f"{_repo_name(task_name)}:{digest.hexdigest()[:16]}"


def missing_hint(api: Any, dockerfile: Path) -> str:
    """A failed build's last line when FROM images are missing: how to import them; else ""."""
    missing = [p for p in parent_images(dockerfile) if image_id(api, p) is None]
    if not missing:
        return ""
    return (
        f"\nFROM {', '.join(missing)}: not in the engine and no registry answered. Import the "
        f"project's Debian base under that name: make bases (or python -m "
        f"autoenvscaling.tools.sandbox.bases {' '.join(missing)})"
    )
