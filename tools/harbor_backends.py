"""Harbor's own environment types as trial backends: `--backend harbor:<type>`.

Our backends (a Harbor custom environment given by import path) run on this machine; Harbor's
cloud types (daytona, modal, e2b, runloop, gke, …) are its scale-out engine for thousands of
sandboxes. For those we build nothing ourselves: `environment_config` hands Harbor its own
`EnvironmentConfig` (trial config) with `type=<type>` and whatever the user passes through
(`kwargs` for the provider, `override_cpus`, `env`, …), validated by Harbor's model. The vendor
SDK comes with Harbor's pip extra of the same name (`harbor[daytona]`) and its credentials from
the provider's usual environment variables; Harbor checks them before the first trial.

Which stages need what from an environment (checked against a type before a run):
- trials (oracle, nop, solver, `trial`, calibration): exec, upload (solution/, tests/), Harbor's
  verifier protocol — every Harbor type has these;
- the gate's anti-cheat probes: also file download (the leak scan reads hashes back) and a
  planted-file upload before the verifier — Harbor's `upload_file`/`download_file`;
- GRPO episodes attach to a live sandbox from the trainer process (our `SandboxRef`): only our
  own backends offer that today; cloud types serve trials and the gate.
"""

from __future__ import annotations

from typing import Any

PREFIX = "harbor:"

#: What each kind of work needs from an environment (see the module docstring).
STAGE_NEEDS: dict[str, tuple[str, ...]] = {
    "trial": ("exec", "upload"),
    "gate": ("exec", "upload", "download"),
    "grpo": ("exec", "upload", "attach"),
}


class HarborBackendError(ValueError):
    """The backend name or Harbor environment options are not usable; says what to change."""


def is_harbor_type(backend: str) -> bool:
    return backend.startswith(PREFIX)


def environment_config(
    backend: str, passthrough: dict[str, Any] | None = None, *, ours: dict[str, dict] | None = None
) -> Any:
    """Harbor's trial `EnvironmentConfig` for `backend` (ours by name, or `harbor:<type>`)."""
    from harbor.models.environment_type import EnvironmentType
    from harbor.models.trial.config import EnvironmentConfig
    from pydantic import ValidationError

    options = dict(passthrough or {})
    if is_harbor_type(backend):
        name = backend.removeprefix(PREFIX)
        try:
            kind = EnvironmentType(name)
        except ValueError:
            known = ", ".join(sorted(t.value for t in EnvironmentType))
            raise HarborBackendError(
                f"Harbor has no environment type {name!r}; known: {known}"
            ) from None
        if "type" in options or "import_path" in options:
            raise HarborBackendError("the backend name sets the type; drop type/import_path")
        base: dict[str, Any] = {"type": kind}
    else:
        if ours is None or backend not in ours:
            known = ", ".join([*(ours or {}), f"{PREFIX}<type>"])
            raise HarborBackendError(f"unknown backend {backend!r}; use one of {known}")
        base = dict(ours[backend])
    try:
        return EnvironmentConfig(**base, **options)
    except (ValidationError, TypeError) as exc:
        raise HarborBackendError(f"Harbor rejects the environment options: {exc}") from None


def pip_extra(backend: str) -> str | None:
    """The Harbor extra that brings a type's vendor SDK (None for built-in engines)."""
    from harbor.environments.factory import _ENVIRONMENT_REGISTRY
    from harbor.models.environment_type import EnvironmentType

    entry = _ENVIRONMENT_REGISTRY.get(EnvironmentType(backend.removeprefix(PREFIX)))
    return entry.pip_extra if entry else None
