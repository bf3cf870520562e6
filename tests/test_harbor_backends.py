"""Scale-out contract, offline: what we hand Harbor for its cloud environment types."""

from __future__ import annotations

import pytest

from autoenvscaling.tools.harbor_backends import (
    HarborBackendError,
    environment_config,
    pip_extra,
)
from autoenvscaling.tools.trials import ENVIRONMENTS

CLOUD = ["daytona", "modal", "e2b", "runloop"]


@pytest.mark.parametrize("kind", CLOUD)
def test_cloud_type_config_passes_harbors_options_through(kind, tmp_path):
    from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig

    options = {
        "kwargs": {"region": "eu", "snapshot": "base"},
        "override_cpus": 2,
        "env": {"A": "1"},
    }
    config = environment_config(f"harbor:{kind}", options, ours=ENVIRONMENTS)
    assert config.type is not None and config.type.value == kind
    assert config.import_path is None
    assert (config.kwargs, config.override_cpus, config.env) == (
        {"region": "eu", "snapshot": "base"},
        2,
        {"A": "1"},
    )
    # Harbor accepts it as a trial's environment, and knows the extra that brings the SDK.
    trial = TrialConfig(
        task=TaskConfig(path=tmp_path),
        trials_dir=tmp_path / "trials",
        agent=AgentConfig(name="oracle"),
        environment=config,
    )
    assert trial.environment.type == config.type
    assert pip_extra(f"harbor:{kind}") == kind


def test_our_backends_keep_their_import_path_and_bad_names_explain():
    ours = environment_config("podman", {"override_memory_mb": 512}, ours=ENVIRONMENTS)
    assert ours.import_path == ENVIRONMENTS["podman"]["import_path"] and ours.type is None
    assert ours.override_memory_mb == 512
    with pytest.raises(HarborBackendError, match="daytona"):
        environment_config("harbor:dayton", ours=ENVIRONMENTS)
    with pytest.raises(HarborBackendError, match="rejects"):
        environment_config("harbor:modal", {"override_cpus": "many"}, ours=ENVIRONMENTS)
    with pytest.raises(HarborBackendError, match="sets the type"):
        environment_config("harbor:modal", {"type": "docker"}, ours=ENVIRONMENTS)
