"""Scale-out contract, offline: what we hand Harbor for its environment types at each stage
(trial, gate, GRPO episode), and combinations a type cannot serve failing before any sandbox."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
from pathlib import Path

import pytest

from autoenvscaling.tools.sandbox.harbor_backends import (
    CAPABILITIES,
    HARBOR_OFFERS,
    OUR_OFFERS,
    STAGE_NEEDS,
    HarborBackendError,
    MissingCapabilityError,
    check_stages,
    environment_config,
)
from autoenvscaling.tools.trials.trial import ENVIRONMENTS

CLOUD = ["daytona", "modal", "e2b", "runloop"]
ROOT = Path(__file__).resolve().parents[1]
GOOD_TASK = Path(__file__).resolve().parent / "fixtures" / "good_task"
OPTIONS = {"kwargs": {"region": "eu", "snapshot": "base"}, "override_cpus": 2, "env": {"A": "1"}}


@pytest.mark.parametrize("kind", CLOUD)
def test_cloud_type_config_passes_harbors_options_through(kind, tmp_path):
    from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig

    config = environment_config(f"harbor:{kind}", OPTIONS, ours=ENVIRONMENTS)
    assert config.type is not None and config.type.value == kind
    assert config.import_path is None
    assert (config.kwargs, config.override_cpus, config.env) == (
        {"region": "eu", "snapshot": "base"},
        2,
        {"A": "1"},
    )
    # Harbor accepts it as a trial's environment.
    trial = TrialConfig(
        task=TaskConfig(path=tmp_path),
        trials_dir=tmp_path / "trials",
        agent=AgentConfig(name="oracle"),
        environment=config,
    )
    assert trial.environment.type == config.type


@pytest.mark.parametrize(
    ("backend", "deleted"),
    [
        ("harbor:podman", False),
        ("harbor:docker", False),
        ("harbor-docker", False),
        ("harbor:modal", True),
    ],
)
def test_local_compose_types_keep_the_image_their_concurrent_trials_share(backend, deleted):
    """A trial of Harbor's docker or podman type that removed the task's image on stop broke a
    concurrent trial's build of the same image in CI ("layer not known"): those types keep it."""
    assert environment_config(backend, ours=ENVIRONMENTS).delete is deleted
    # A user's own choice still wins.
    assert environment_config(backend, {"delete": True}, ours=ENVIRONMENTS).delete is True


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


# --------------------------------------------------------------------------- what Harbor receives


class Handed(Exception):
    """Raised by the stand-in for Harbor's entry point: what we handed it, and nothing started."""

    def __init__(self, config):
        super().__init__("captured")
        self.config = config


def _capture_trials(monkeypatch) -> list:
    from harbor.trial.trial import Trial

    seen: list = []

    async def create(config, *args, **kwargs):
        seen.append(config.environment)
        raise Handed(config.environment)

    monkeypatch.setattr(Trial, "create", staticmethod(create))
    return seen


def _capture_environments(monkeypatch) -> list:
    from harbor.environments.factory import EnvironmentFactory

    seen: list = []

    def create(**kwargs):
        seen.append(kwargs["config"])
        raise Handed(kwargs["config"])

    monkeypatch.setattr(EnvironmentFactory, "create_environment_from_config", create)
    return seen


async def _hand_over(stage: str, monkeypatch, tmp_path: Path):
    """Run `stage` on harbor:modal with OPTIONS up to the point Harbor takes over."""
    if stage == "trial":
        from autoenvscaling.tools.trials.trial import run_trial

        seen = _capture_trials(monkeypatch)
        outcome = await run_trial(
            GOOD_TASK, backend="harbor:modal", environment_options=OPTIONS, trials_dir=tmp_path
        )
        assert "captured" in (outcome.error or "")
        return seen
    if stage == "gate":
        from autoenvscaling.tools.gate import GateConfig
        from autoenvscaling.tools.gate.pipeline import run_stage

        seen = _capture_trials(monkeypatch)
        config = GateConfig(
            backend="harbor:modal", environment_options=OPTIONS, trials_dir=tmp_path
        )
        for name in ("build", "oracle", "nop", "anti_cheat"):
            await run_stage(name, GOOD_TASK, config)
        return seen
    from autoenvscaling.training.grpo.sandboxes import task_starter

    seen = _capture_environments(monkeypatch)
    with pytest.raises(Handed):
        await task_starter("harbor:modal", OPTIONS)(GOOD_TASK)
    return seen


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stage", ["trial", "gate", "grpo"])
async def test_harbor_receives_the_type_kwargs_and_overrides(stage, monkeypatch, tmp_path):
    seen = await _hand_over(stage, monkeypatch, tmp_path)
    assert seen, f"{stage}: nothing reached Harbor"
    for config in seen:  # every trial of every gate stage, or the episode's environment
        assert config.type is not None and config.type.value == "modal"
        assert config.import_path is None
        assert config.kwargs == OPTIONS["kwargs"]
        assert (config.override_cpus, config.env) == (2, {"A": "1"})
    if stage == "gate":  # build (a nop trial), oracle, nop and the anti-cheat probes all ran
        assert len(seen) >= 4


# --------------------------------------------------------------------------- refused up front


def test_a_stage_the_type_cannot_serve_fails_naming_stage_and_capability():
    from autoenvscaling.tools.gate import GateConfig

    with pytest.raises(ValueError, match=r"anti_cheat/tamperer needs 'reap'"):
        GateConfig(backend="harbor:modal", tamperer_probe=True)
    with pytest.raises(ValueError, match=r"anti_cheat/interpreters needs 'reap'"):
        GateConfig(backend="harbor-docker", tamper_interpreters=True)
    # The same probes on our engines, or the gate without them on a Harbor type, are fine.
    GateConfig(backend="podman", tamperer_probe=True, tamper_interpreters=True)
    GateConfig(backend="harbor:modal", tamperer_probe=True, skip=["anti_cheat"])
    with pytest.raises(ValueError, match="no environment type 'modl'"):
        GateConfig(backend="harbor:modl")
    with pytest.raises(MissingCapabilityError, match="stage gate:anti_cheat/tamperer"):
        check_stages("harbor:e2b", ["trial", "gate:anti_cheat/tamperer"])


@pytest.mark.timeout(120)
def test_validate_refuses_before_any_sandbox_starts(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from autoenvscaling.cli.main import app

    trials = _capture_trials(monkeypatch)
    environments = _capture_environments(monkeypatch)
    env_file = tmp_path / "env.json"
    env_file.write_text(json.dumps(OPTIONS))
    monkeypatch.setenv("AUTOENVSCALING_GATE_TAMPERER_PROBE", "true")
    result = CliRunner().invoke(
        app,
        ["validate", str(GOOD_TASK), "-b", "harbor:modal", "--harbor-env", str(env_file), "--json"],
    )
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "anti_cheat/tamperer" in text and "reap" in text
    assert trials == [] and environments == []


def test_no_stage_needs_a_live_sandbox_of_ours():
    """The proposer's workspace, our solver (baseline, calibration, refresh; a computer-use
    task's desktop tools included), the cheat agent and GRPO episodes run over `exec` on any
    Harbor type (tests/test_exec_stages.py runs them so); only the isolation probes forced onto
    shared verifiers need what Harbor's types lack (`reap`)."""
    ours_only = ["propose", "solve", "gate:calibrate/our_solver", "gate:anti_cheat/cheat_agent"]
    check_stages("harbor:modal", [*ours_only, "grpo"])
    assert "attach" not in CAPABILITIES
    refused = [s for s, needs in STAGE_NEEDS.items() if not set(needs) <= HARBOR_OFFERS]
    assert refused == ["gate:anti_cheat/tamperer", "gate:anti_cheat/interpreters"], refused


def test_training_job_and_cli_accept_harbor_types_and_pass_options(tmp_path):
    from autoenvscaling.training.backend import TrainJob

    job = TrainJob(
        job_id="j",
        base_model="m",
        task_dirs=[GOOD_TASK],
        work_dir=tmp_path,
        sandbox_backend="harbor:daytona",
        sandbox_options=OPTIONS,
    )
    assert job.sandbox_options == OPTIONS
    with pytest.raises(ValueError, match="rejects"):
        TrainJob(
            job_id="j",
            base_model="m",
            task_dirs=[GOOD_TASK],
            work_dir=tmp_path,
            sandbox_backend="harbor:daytona",
            sandbox_options={"override_cpus": "many"},
        )


# --------------------------------------------------------------------------- the table itself


def test_every_harbor_type_that_imports_here_offers_what_the_table_says():
    """HARBOR_OFFERS rests on Harbor's BaseEnvironment contract: check the installed classes."""
    from harbor.environments.factory import _ENVIRONMENT_REGISTRY

    checked = []
    for kind, entry in _ENVIRONMENT_REGISTRY.items():
        try:
            cls = getattr(importlib.import_module(entry.module), entry.class_name)
        except ImportError:  # its vendor SDK (a Harbor extra) is not installed here
            continue
        for method in ("exec", "upload_file", "upload_dir", "download_file", "download_dir"):
            assert not getattr(getattr(cls, method), "__isabstractmethod__", False), (kind, method)
        assert "user" in inspect.signature(cls.exec).parameters, kind  # root for the probes
        checked.append(kind.value)
    assert {"docker", "podman"} <= set(checked), checked
    assert HARBOR_OFFERS == {"exec", "upload", "download", "root"}


def capability_table() -> str:
    """The docs' stage -> capability table (docs/scaling.md), written from `STAGE_NEEDS` and
    `offers`."""
    caps = list(CAPABILITIES)
    rows = [
        "| stage | " + " | ".join(caps) + " | our engines | harbor:<type> |",
        "| --- | " + " | ".join("---" for _ in caps) + " | --- | --- |",
    ]
    for stage, needs in STAGE_NEEDS.items():
        marks = " | ".join("x" if c in needs else "" for c in caps)
        ours = "yes" if set(needs) <= OUR_OFFERS else "no"
        harbor = "yes" if set(needs) <= HARBOR_OFFERS else "no"
        rows.append(f"| {stage} | {marks} | {ours} | {harbor} |")
    return "\n".join(rows)


def test_docs_scaling_out_table_is_written_from_the_code_table():
    readme = (ROOT / "docs" / "scaling.md").read_text()
    assert capability_table() in readme, (
        "regenerate: python -c 'from tests.test_harbor_backends import capability_table; "
        "print(capability_table())'"
    )
    for capability in CAPABILITIES:
        assert f"`{capability}`" in readme
    assert set(STAGE_NEEDS) >= {"trial", "grpo", "gate:anti_cheat"}


# --------------------------------------------------------------------------- the exec shell


@pytest.mark.timeout(300)
def test_grpo_episode_over_exec_as_on_a_harbor_type(engine_ready, tmp_path):
    """A GRPO episode whose environment has no sandbox to attach to (as on harbor:<type>): the
    shell runs over Harbor's `exec` of a real environment, keeps cwd and exports, leaves a command
    past its timeout running (read_output, interrupt) as the persistent shell does, and the
    task's own verifier scores the work."""
    from autoenvscaling.training.grpo.episode_env import EpisodeConfig, EventLoop, TaskEpisode
    from autoenvscaling.training.grpo.sandboxes import task_starter
    from tests.test_training_support import make_tasks

    real = task_starter("podman")

    class ExecOnly:  # what task_starter gives for a Harbor type: no `sandbox` attribute
        def __init__(self, live):
            self.live = live

        async def open_shell(self):
            from autoenvscaling.tools.sandbox.exec_shell import ExecShell

            return ExecShell(self.live.environment)

        async def verify(self):
            return await self.live.verify()

        async def close(self):
            await self.live.close()

    async def start(task_dir):
        return ExecOnly(await real(task_dir))

    tasks = make_tasks(tmp_path / "tasks")
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, start, EpisodeConfig(command_timeout_sec=2))
        episode.reset(task_dir=str(tasks["write-numbers"]))
        assert episode.run("cd /app && export N=1") == "[exit code 0]"
        assert episode.run("echo $N > answer.txt; pwd") == "/app\n[exit code 0]"
        assert episode.run("echo oops >&2; exit 3").startswith("oops")
        late = episode.run("sleep 3; echo late")  # past its timeout: it keeps running
        assert late.startswith("[still running")
        assert episode.read_output(timeout_sec=10) == "late\n[exit code 0]"
        assert episode.run("sleep 30").startswith("[still running")
        stopped = episode.interrupt()
        assert stopped.endswith("[exit code 137]") and ".aes-exec" not in stopped
        assert episode.run("pwd") == "/app\n[exit code 0]"  # the shell kept its state
        assert loop.run(asyncio.wait_for(episode._finish(), 120)).reward == 0.5
    finally:
        loop.stop()
