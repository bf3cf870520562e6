"""A Harbor environment with nothing of ours to attach to, for tests of our stages on any Harbor type.

It is our podman environment (a real container, a real Harbor `BaseEnvironment`) without the live
sandbox reference our terminal attaches to, so our stages reach it only through the methods every
Harbor type has (`exec`, `upload_*`, `download_*`), as on a cloud type. `exec_only_backend`
registers it as a backend name, which the capability table treats as a Harbor type.
"""

from __future__ import annotations

from typing import Any

from autoenvscaling.tools.sandbox.harbor_env import HardenedPodmanEnvironment

BACKEND = "exec-only-podman"


class ExecOnlyPodmanEnvironment(HardenedPodmanEnvironment):
    @property
    def sandbox_ref(self) -> Any:
        raise AttributeError("no live sandbox to attach to on this environment type")


def exec_only_backend(monkeypatch: Any) -> str:
    """Register BACKEND for this test (trials, the gate, GRPO episodes); returns its name."""
    from autoenvscaling.tools.trials import trial

    path = f"{__name__}:{ExecOnlyPodmanEnvironment.__name__}"
    monkeypatch.setitem(trial.ENVIRONMENTS, BACKEND, {"import_path": path})
    return BACKEND
