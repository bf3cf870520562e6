"""Harbor's own environment types as backends: `--backend harbor:<type>` for trials, the gate and
GRPO episodes.

Our backends (a Harbor custom environment given by import path) run on this machine; Harbor's
cloud types (daytona, modal, e2b, runloop, gke, …) are its scale-out engine for thousands of
sandboxes. For those we build nothing ourselves: `environment_config` hands Harbor its own
`EnvironmentConfig` (trial config) with `type=<type>` and whatever the user passes through
(`kwargs` for the provider, `override_cpus`, `env`, …), validated by Harbor's model. The vendor
SDK comes with Harbor's pip extra of the same name (`harbor[daytona]`) and its credentials from
the provider's usual environment variables; Harbor checks them before the first trial.

What each kind of work needs from an environment is one table, `STAGE_NEEDS` (stage ->
capabilities), and what each backend offers is `offers()`. `check_stages` compares the two
before any sandbox starts, and the README's "Scaling out" table is written from them
(tests/test_harbor_backends.py keeps the two equal), so the error a user sees and the documentation cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, get_args

from harbor.models.environment_type import EnvironmentType
from harbor.models.trial.config import EnvironmentConfig
from pydantic import ValidationError

from .base import Backend

PREFIX = "harbor:"
#: Our engines: Harbor custom environments in tools/sandbox/harbor_env.py.
OUR_ENGINES: tuple[Backend, ...] = get_args(Backend)

#: The one registry of backends a trial or an episode names: our engines (Harbor custom
#: environments by import path) and Harbor's own docker compose type (needs `docker compose`
#: v2). Any other Harbor type is `harbor:<type>`. Tests and benchmarks register more here.
ENVIRONMENTS: dict[str, dict[str, str]] = {
    "podman": {"import_path": "autoenvscaling.tools.sandbox.harbor_env:HardenedPodmanEnvironment"},
    "docker": {"import_path": "autoenvscaling.tools.sandbox.harbor_env:HardenedDockerEnvironment"},
    "harbor-docker": {"type": "docker"},
}

Capability = Literal["exec", "upload", "download", "root", "reap"]

#: What each capability means, and who offers it.
CAPABILITIES: dict[Capability, str] = {
    "exec": "run a command in the sandbox (Harbor's `exec`)",
    "upload": "copy files in (`upload_file`/`upload_dir`: solution/, tests/, probe files)",
    "download": "copy files out (`download_file`/`download_dir`: logs, artifacts, the leak "
    "scan's listings and hashes)",
    "root": "run a command as root (`exec(user='root')`: the leak and exploit probes list, hash "
    "and rewrite the container's files)",
    "reap": "end every process the agent left behind before a shared verifier runs (our engines "
    "kill them from the host; Harbor's types leave them running)",
}

#: What each stage needs from the environment it runs in. Stages that never start a sandbox
#: (lint, decontam, dedup) are not listed. A probe forced onto shared verifiers (the tamperer and
#: interpreter wrappers set to "on"; by default they run only where the verifier is separate,
#: which any backend serves), and a stage run with our own solver agent (rather than a Harbor
#: agent that uses `exec`), has its own row. Our terminal (the proposer's workspace, the solver,
#: the cheat agent, GRPO episodes) runs over `exec` where there is no live sandbox of ours to
#: attach to (tools/sandbox/exec_shell.py), and so do the desktop tools of a computer-use task
#: (exec_shell.EnvironmentExec): where our engines attach a live shell, that is a faster path.
STAGE_NEEDS: dict[str, tuple[Capability, ...]] = {
    "trial": ("exec", "upload", "download"),
    "gate:build": ("exec", "upload", "download"),
    "gate:oracle": ("exec", "upload", "download"),
    "gate:nop": ("exec", "upload", "download"),
    "gate:repeat": ("exec", "upload", "download"),
    "gate:anti_cheat": ("exec", "upload", "download", "root"),
    "gate:anti_cheat/tamperer": ("exec", "upload", "download", "root", "reap"),
    "gate:anti_cheat/interpreters": ("exec", "upload", "download", "root", "reap"),
    "gate:anti_cheat/cheat_agent": ("exec", "upload", "download", "root"),
    "gate:calibrate": ("exec", "upload", "download"),
    "gate:calibrate/our_solver": ("exec", "upload", "download"),
    "propose": ("exec", "upload", "download"),
    "solve": ("exec", "upload", "download"),
    "grpo": ("exec", "upload", "download"),
}

#: Every Harbor environment type implements `exec(user=...)`, `upload_*` and `download_*`
#: (abstract methods of `BaseEnvironment`; tests/test_harbor_backends.py checks the installed
#: classes). Killing the agent's leftover processes is our engines' own addition.
HARBOR_OFFERS: frozenset[Capability] = frozenset({"exec", "upload", "download", "root"})
OUR_OFFERS: frozenset[Capability] = frozenset(CAPABILITIES)


class HarborBackendError(ValueError):
    """The backend name or Harbor environment options are not usable; says what to change."""


class MissingCapabilityError(HarborBackendError):
    """A stage needs something the chosen backend does not offer; raised before any work."""


def is_harbor_type(backend: str) -> bool:
    return backend.startswith(PREFIX)


def offers(backend: str) -> frozenset[Capability]:
    """What `backend` offers: ours everything, Harbor's types (`harbor-docker` too) the base set."""
    return OUR_OFFERS if backend in OUR_ENGINES else HARBOR_OFFERS


def check_stages(backend: str, stages: Iterable[str]) -> None:
    """Raise MissingCapabilityError naming each stage and the capability `backend` lacks."""
    have = offers(backend)
    gaps: list[tuple[str, Capability]] = [
        (stage, need) for stage in stages for need in STAGE_NEEDS.get(stage, ()) if need not in have
    ]
    if not gaps:
        return
    lines = "; ".join(
        f"stage {stage} needs {need!r} ({CAPABILITIES[need]})" for stage, need in gaps
    )
    raise MissingCapabilityError(
        f"backend {backend!r} cannot run this: {lines}. Use one of our engines "
        f"({' | '.join(OUR_ENGINES)}) for it, or turn the stage or probe off."
    )


def our_engine(backend: str) -> Backend | None:
    """The engine `backend` names when it is one of ours, else None (harbor-docker, a Harbor
    type): the one place a caller asks which engine it is on."""
    return next((engine for engine in OUR_ENGINES if engine == backend), None)


def validate_backend(backend: str, passthrough: dict[str, Any] | None = None) -> str:
    """`backend` when it names one of our engines or a Harbor type that accepts `passthrough`."""
    environment_config(backend, passthrough, ours=ENVIRONMENTS)
    return backend


#: Harbor's local compose types: one image per task on this machine, shared by concurrent trials
#: of it (calibration's rollouts, the gate's reruns). Their trials keep it (`delete=False`: `down`
#: without `--rmi`): a trial that removed it on stop broke another's build of the same image
#: ("getting top layer info: layer not known", seen in CI). An option `delete` still wins.
SHARED_IMAGE_TYPES = frozenset({"docker", "podman"})


def environment_config(
    backend: str, passthrough: dict[str, Any] | None = None, *, ours: dict[str, dict] | None = None
) -> Any:
    """Harbor's trial `EnvironmentConfig` for `backend` (ours by name, or `harbor:<type>`)."""
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
    if str(getattr(base.get("type"), "value", base.get("type"))) in SHARED_IMAGE_TYPES:
        base["delete"] = False
    try:
        return EnvironmentConfig(**{**base, **options})
    except (ValidationError, TypeError) as exc:
        raise HarborBackendError(f"Harbor rejects the environment options: {exc}") from None
