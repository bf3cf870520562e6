"""One classifier of infrastructure vs the task's fault (tools/trials/faults.py), used everywhere.

First the rule itself, over every event it knows, seen the two ways the code meets it: as a
Harbor trial's result (calibration, baseline, refresh) and as an exception raised the way a GRPO
episode raises it. Then one real fault — the container engine refuses a sandbox start
(tests/fault_injection.py) — injected at calibration, in a flywheel refresh and inside GRPO
episodes (a live one, and a real TRL training step in the worker process): each classifies it
as infrastructure, leaves it unscored, and goes on. A task-author error found by calibration
is the task's fault and costs the proposer a full -1.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from harbor.trial.errors import AgentTimeoutError, VerifierTimeoutError
from harbor.verifier.verifier import AddTestsDirError, RewardFileNotFoundError

from autoenvscaling.graphs.solver.attempt import outcome_of
from autoenvscaling.tools.gate import GateConfig, run_stage
from autoenvscaling.tools.gate.config import STAGES
from autoenvscaling.tools.gate.results import StageResult, make_verdict
from autoenvscaling.tools.sandbox.base import BuildError, SandboxLimitError
from autoenvscaling.tools.sandbox.engine import EngineUnavailableError
from autoenvscaling.tools.trials.faults import (
    NoRewardError,
    RewardOutOfRangeError,
    episode_failure,
    trial_failure,
)
from autoenvscaling.tools.trials.trial import TrialOutcome
from autoenvscaling.tools.trials.verifier import VerifierRunError
from autoenvscaling.training.grpo.sandboxes import VerifierError

from . import test_training_grpo as grpo_tests
from .conftest import FIXTURES
from .fault_injection import FAULT_ENV, MESSAGE, RefusedStarts

TASK = FIXTURES / "good_task"
SCHEDULED = "tests.scheduled_agent:ScheduledAgent"


def _raised(make: Callable[[], BaseException]) -> BaseException:
    """The exception as the code raises it (with its `raise ... from` chain filled in)."""
    try:
        raise make()
    except BaseException as exc:  # noqa: BLE001 - the point is to catch it
        return exc


def _from(outer: Callable[[str], BaseException], inner: BaseException) -> BaseException:
    def make() -> BaseException:
        try:
            raise inner
        except BaseException as cause:  # noqa: BLE001
            wrapped = outer(f"{type(cause).__name__}: {cause}")
            wrapped.__cause__ = cause
            return wrapped

    return _raised(make)


def _outcome(
    error: str | None = None, reward: float | None = None, meta: dict | None = None
) -> TrialOutcome:
    return TrialOutcome(
        task="t", task_name="t", agent="a", backend="podman", reward=reward, error=error,
        agent_metadata=meta or {},
    )  # fmt: skip


# (event, as a trial's result, as a GRPO episode's exception and phase, expected class)
EVENTS = [
    (
        "engine refuses the sandbox",
        _outcome(f"EngineUnavailableError: {MESSAGE}"),
        (_raised(lambda: EngineUnavailableError(MESSAGE)), "start"),
        "infrastructure",
    ),
    (
        "sandbox fails inside a tool call",
        _outcome("SandboxError: persistent shell failed to start"),
        (_raised(lambda: EngineUnavailableError("no such container")), "tool"),
        "infrastructure",
    ),
    (
        "model endpoint down after retries",
        _outcome(None, 0.0, {"stop_reason": "error", "error": "APIConnectionError: refused"}),
        None,  # a GRPO episode's model is the trainer's own
        "infrastructure",
    ),
    (
        "verifier cannot be run (tests not copied in)",
        _outcome("AddTestsDirError: upload failed"),
        (_from(VerifierError, _from(VerifierRunError, AddTestsDirError("upload"))), "verify"),
        "infrastructure",
    ),
    (
        "our own bug",
        _outcome("KeyError: 'settings'"),
        (_raised(lambda: KeyError("settings")), "tool"),
        "infrastructure",
    ),
    (
        "the task's build fails",
        _outcome("BuildError: RUN apt-get install nosuchpkg failed"),
        (_from(RuntimeError, BuildError("RUN apt-get install nosuchpkg failed")), "start"),
        "task",
    ),
    (
        "the verifier writes no reward",
        _outcome("RewardFileNotFoundError: /logs/verifier/reward.txt"),
        (_from(VerifierError, _from(VerifierRunError, RewardFileNotFoundError("x"))), "verify"),
        "task",
    ),
    (
        "the reward has no 'reward' key",
        _outcome(None, None),
        (_from(VerifierError, NoRewardError("no rewards")), "verify"),
        "task",
    ),
    (
        "the reward is out of range",
        _outcome("RewardOutOfRangeError: reward is 7, outside [0, 1]"),
        (_from(VerifierError, RewardOutOfRangeError("reward is 7")), "verify"),
        "task",
    ),
    (
        "the tests hang past their timeout",
        _outcome("VerifierTimeoutError: verifier timed out after 60s"),
        (_from(VerifierRunError, VerifierTimeoutError("timed out")), "verify"),
        "task",
    ),
    (
        "the policy went over the writable-layer cap (scored)",
        _outcome("SandboxLimitError: the writable layer went over its 64 MB cap (disk_mb)"),
        (_raised(lambda: SandboxLimitError("over its 64 MB cap (disk_mb)")), "tool"),
        None,
    ),
    ("the policy solved it", _outcome(None, 1.0), None, None),
    ("the policy failed it", _outcome(None, 0.0), None, None),
    (
        "the policy ran out of time (scored)",
        _outcome(f"AgentTimeoutError: {AgentTimeoutError('after 300 s')}", 0.0),
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("trial", "episode", "expected"),
    [pytest.param(t, e, x, id=name) for name, t, e, x in EVENTS],
)
def test_one_rule_for_trials_and_episodes(trial, episode, expected) -> None:
    found = trial_failure(trial, actor="policy")
    assert (found.fault if found else None) == expected, found
    # Baseline and refresh score exactly what the rule scores ("error" is never a reward).
    assert (outcome_of(trial) == "error") is (expected is not None)
    if episode is not None:
        error, phase = episode
        found = episode_failure(error, phase=phase)
        assert (found.fault if found else None) == expected


@pytest.mark.parametrize(
    ("error", "advice"),
    [
        ("AgentTimeoutError: Agent execution timed out after 300 seconds", "[agent].timeout_sec"),
        ("SandboxLimitError: the writable layer went over its 64 MB cap", "storage_mb"),
    ],
)
def test_a_limit_is_the_policys_own_but_the_reference_solutions_fault(error, advice) -> None:
    past = _outcome(error, None)
    assert trial_failure(past, actor="policy") is None  # scored: 0 without a reward
    reference = trial_failure(past, actor="reference")
    assert reference is not None and reference.task_fault and advice in reference.advice


# -- the same real fault at calibration, in refresh and in GRPO -----------------------------------


def single_try(monkeypatch) -> None:
    """Trials without their retry of a sandbox that did not start (tools/trials/trial.py; that
    retry is tests/test_trial_start_retry.py's): here the refused start must stay lost."""
    from autoenvscaling.tools.trials import trial

    monkeypatch.setattr(trial, "START_RETRIES", 0)


async def test_calibration_leaves_an_infrastructure_rollout_out(
    engine_ready, tmp_path, monkeypatch
):
    single_try(monkeypatch)
    fault = RefusedStarts(1).install(monkeypatch.setattr)
    config = GateConfig(
        solver=SCHEDULED,
        trial_concurrency=1,
        solver_kwargs={
            "schedule": "10101010",
            "counter_file": str(tmp_path / "attempts"),
            "task_dir": str(TASK),
        },
    )
    result = await run_stage("calibrate", TASK, config)
    assert fault.refused == 1, "the fault was never injected: the test tested nothing"
    lost = [a for a in result.details["attempts"] if a["fault"]]
    assert len(lost) == 1 and lost[0]["fault"] == "infrastructure"
    assert lost[0]["reward"] is None and "EngineUnavailableError" in lost[0]["error"]
    # Judged on the rollouts that ran: one refused start is no verdict on the task.
    assert not result.infrastructure_error and result.details["infrastructure_errors"] == 1
    assert result.details["rollouts"] == len(result.details["attempts"]) - 1


async def test_calibration_rejects_a_broken_verifier_as_the_tasks_fault(engine_ready, tmp_path):
    """test.sh exits before writing a reward when a check fails (the `set -e` mistake): the
    solver's failed rollouts expose it, and the task is rejected as broken (-1), not as too hard."""
    task = tmp_path / "word-count"
    shutil.copytree(TASK, task)
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        "python3 /tests/test_outputs.py || exit 1\necho 1 > /logs/verifier/reward.txt\n"
    )
    config = GateConfig(
        solver=SCHEDULED,
        trial_concurrency=2,
        solver_kwargs={
            "schedule": "1010",
            "counter_file": str(tmp_path / "attempts"),
            "task_dir": str(task),
        },
    )
    result = await run_stage("calibrate", task, config)
    assert not result.passed and not result.infrastructure_error
    assert result.details["task_fault"] == "RewardFileNotFoundError", result.reason
    assert "broken task" in result.reason and "wrote no reward" in result.reason
    assert {a["fault"] for a in result.details["attempts"]} == {None, "task"}
    others = [StageResult.skip(s, "not under test") for s in STAGES if s != "calibrate"]
    verdict = make_verdict(task, [*others, result])
    assert (verdict.stage, verdict.proposer_reward) == ("calibrate", -1.0)
    assert not verdict.infrastructure_error


async def test_refresh_does_not_score_an_infrastructure_attempt(
    engine_ready, tmp_path, monkeypatch
):
    from langgraph.checkpoint.memory import InMemorySaver

    from autoenvscaling.graphs.agent.scripted_model import register
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.builder import build_flywheel
    from autoenvscaling.tools.rollouts.store import RolloutStore
    from autoenvscaling.tools.tasks.pool import Pool

    from .flywheel_policy import shared_policy

    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(TASK, seed / "word-count")
    ctx = FlywheelContext(
        run_dir=str(tmp_path / "run"),
        rounds=1,
        proposals=0,  # the round is setup, inspect, review, train (off) and refresh
        policy_model=register("fault-policy", shared_policy()),
        seed_dir=str(seed),
        train=False,
        baseline_tasks=0,
        refresh_attempts=2,
        solver_max_turns=2,
    )
    single_try(monkeypatch)
    fault = RefusedStarts(1).install(monkeypatch.setattr)
    graph = build_flywheel(checkpointer=InMemorySaver())
    await graph.ainvoke(
        {"rounds": 1}, {"configurable": {"thread_id": "t"}, "recursion_limit": 200}, context=ctx
    )
    assert fault.refused == 1, "the fault was never injected: the test tested nothing"
    run = tmp_path / "run"
    with RolloutStore(run / "rollouts.db") as store:
        refresh = [
            a
            for a in store.list_attempts(role="solver", limit=100)
            if a.metadata.get("purpose") == "refresh"
        ]
    lost = [a for a in refresh if a.outcome == "error"]
    scored = [a for a in refresh if a.outcome != "error"]
    assert len(lost) == 1 and len(scored) == 1, [(a.outcome, a.error) for a in refresh]
    assert lost[0].reward is None and lost[0].metadata["fault"] == "infrastructure"
    assert "EngineUnavailableError" in (lost[0].error or "")
    assert scored[0].reward is not None and scored[0].metadata["fault"] is None
    # The pool's measurement is the one scored attempt; the refused start retired nothing.
    (entry,) = Pool(run / "pool").entries()
    assert entry.status == "active"
    assert [(p.round, p.n) for p in entry.history] == [(1, 1)]
    metrics = json.loads((run / "reports" / "metrics.json").read_text())[0]
    assert metrics["solver_infrastructure_failures"] == 1


async def test_a_solver_attempt_whose_container_dies_is_infrastructure(engine_ready, tmp_path):
    """The solver does the work, then its container is removed from the host (a real engine-side
    failure): no verifier may score the work that is gone as a 0; the attempt is
    infrastructure, and the rollout is not scored."""
    from langchain_core.messages import AIMessage

    from autoenvscaling.graphs.agent.loop import LoopBudget
    from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call
    from autoenvscaling.graphs.models import ModelConfig
    from autoenvscaling.graphs.solver.attempt import SolverSettings, solve_task
    from autoenvscaling.tools.sandbox.cleanup import OWNER_LABEL, owner
    from autoenvscaling.tools.sandbox.engine import client

    removed: list[str] = []

    def respond(messages):
        if not any(isinstance(m, AIMessage) for m in messages):
            solve = (TASK / "solution" / "solve.sh").read_text()
            return reply("", tool_call("run", command=solve))
        if not removed:  # this process's one running container: the attempt's
            api = client("podman").api
            (box,) = api.containers(filters={"label": f"{OWNER_LABEL}={owner()}"})
            api.remove_container(box["Id"], force=True)
            removed.append(box["Id"])
        return "Done."

    settings = SolverSettings(
        model=ModelConfig(model=register("solver-container-dies", respond)),
        store_path=str(tmp_path / "rollouts.db"),
        run_id="test",
        budget=LoopBudget(max_turns=4),
    )
    attempt = await solve_task(TASK, settings, trials_dir=tmp_path)
    assert removed, "the fault was never injected: the test tested nothing"
    assert (attempt.outcome, attempt.fault, attempt.reward) == ("error", "infrastructure", None)
    assert "SandboxError" in (attempt.error or "") and "no such container" in (attempt.error or "")


def test_grpo_episode_whose_sandbox_is_refused_is_not_scored(engine_ready, tmp_path, monkeypatch):
    """`reset` never raises into TRL: the episode is marked, the tools answer a short error,
    `_finish` gives no reward and says why."""
    from autoenvscaling.training.grpo.episode_env import (
        SANDBOX_UNAVAILABLE,
        EpisodeConfig,
        EventLoop,
        TaskEpisode,
    )
    from autoenvscaling.training.grpo.sandboxes import task_starter

    from .test_training_support import make_tasks

    task = make_tasks(tmp_path / "tasks")["hello-file"]
    fault = RefusedStarts(1).install(monkeypatch.setattr)
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, task_starter("podman"), EpisodeConfig())
        episode.reset(task_dir=str(task))
        assert fault.refused == 1
        assert episode.failure is not None and episode.failure.fault == "infrastructure"
        assert episode.run("echo hello > /app/hello.txt") == SANDBOX_UNAVAILABLE
        record = loop.run(episode._finish())
        assert (record.reward, record.fault) == (None, "infrastructure")
        assert "EngineUnavailableError" in (record.error or "")
        # The next episode on the same instance starts for real and is scored.
        episode.reset(task_dir=str(task))
        assert episode.failure is None
        episode.run("echo hello > /app/hello.txt")
        record = loop.run(episode._finish())
        assert (record.reward, record.fault) == (1.0, None)
    finally:
        loop.stop()


def test_grpo_episode_whose_container_vanishes_is_scored_0_unless_the_engine_fails(
    engine_ready, tmp_path, monkeypatch
):
    """The container is removed mid-episode. While the engine answers, that is what a policy's
    own `kill -KILL -1` looks like (the same 'die' 137 and 'remove' events, measured), so the
    episode scores 0 (tests/security/test_grpo_verify.py has the attack). When the engine stops
    answering as well, nobody can tell: infrastructure, nothing scored."""
    from autoenvscaling.tools.sandbox import engine
    from autoenvscaling.tools.sandbox.engine import client
    from autoenvscaling.training.grpo.episode_env import (
        SANDBOX_UNAVAILABLE,
        EpisodeConfig,
        EventLoop,
        TaskEpisode,
    )
    from autoenvscaling.training.grpo.sandboxes import task_starter

    from .test_training_support import make_tasks

    task = make_tasks(tmp_path / "tasks")["hello-file"]
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, task_starter("podman"), EpisodeConfig())
        for engine_answers in (True, False):
            episode.reset(task_dir=str(task))
            assert episode.run("echo hello > /app/hello.txt") == "[exit code 0]"
            live = episode._live
            assert live is not None
            client("podman").api.remove_container(
                live.sandbox.ref.handle["container_id"], force=True
            )
            if not engine_answers:
                monkeypatch.setattr(engine, "client", _refusing_client)
            answers = [episode.run("cat /app/hello.txt") for _ in range(3)]
            record = loop.run(episode._finish())
            if engine_answers:
                assert answers[-1].startswith("[error: the sandbox was stopped"), answers
                assert (record.reward, record.fault) == (0.0, None), record
            else:
                assert answers[-1] == SANDBOX_UNAVAILABLE, answers
                assert (record.reward, record.fault) == (None, "infrastructure"), record
    finally:
        monkeypatch.undo()
        loop.stop()


def _refusing_client(*_args, **_kwargs):
    from autoenvscaling.tools.sandbox.engine import EngineUnavailableError

    raise EngineUnavailableError("injected fault: the podman service stopped answering")


def _fill_the_disk(tmp_path, measured: bool):
    """A GRPO episode that writes hello.txt right, then 320 MB into a 64 MB layer."""
    from autoenvscaling.training.grpo.episode_env import EpisodeConfig, EventLoop, TaskEpisode
    from autoenvscaling.training.grpo.sandboxes import task_starter

    from .test_training_support import make_tasks

    task = make_tasks(tmp_path / "tasks")["hello-file"]
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("memory_mb = 512", "memory_mb = 512\nstorage_mb = 64"))
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, task_starter("podman"), EpisodeConfig())
        episode.reset(task_dir=str(task))
        episode.run("echo hello > /app/hello.txt")
        fill = "for i in $(seq 1 40); do head -c 8M /dev/urandom > /tmp/fill.$i || break; done"
        if measured:  # the measured cap stops the sandbox within a second of the overrun
            fill += "; sleep 30"
        answers = [episode.run(fill, timeout_sec=25)] + [episode.run("ls /app") for _ in range(2)]
        return loop.run(episode._finish()), answers
    finally:
        loop.stop()


def test_grpo_episode_that_fills_its_disk_goes_on_and_is_scored(engine_ready, tmp_path):
    """The layer is a filesystem of its cap: the writes past it fail with ENOSPC, the episode
    goes on and its verifier scores the work (right here: 1.0) — never dropped as
    infrastructure."""
    record, answers = _fill_the_disk(tmp_path, measured=False)
    assert "No space left on device" in answers[0], answers
    assert "hello.txt" in answers[1], answers
    assert (record.reward, record.fault, record.error) == (1.0, None, None), (record, answers)


def test_grpo_episode_stopped_by_a_measured_cap_is_scored_zero(engine_ready, tmp_path, monkeypatch):
    """Where the cap is measured, the sandbox is stopped by our limit, not by the engine: the
    policy's own doing, scored 0 like any attempt that leaves nothing right — never dropped as
    infrastructure, which would spare it the 0."""
    from autoenvscaling.tools.sandbox import layerfs

    def measured(*_args: object) -> str:
        raise layerfs.NotConfinedError("test: the measured cap")

    monkeypatch.setattr(layerfs, "confine", measured)
    record, answers = _fill_the_disk(tmp_path, measured=True)
    assert (record.reward, record.fault) == (0.0, None), (record, answers)
    assert "disk_mb" in (record.error or ""), record


def test_grpo_episode_whose_tests_hang_is_the_tasks_fault(engine_ready, tmp_path):
    """tests/test.sh runs past [verifier].timeout_sec: a task-author error, as in a trial."""
    from autoenvscaling.training.grpo.episode_env import EpisodeConfig, EventLoop, TaskEpisode
    from autoenvscaling.training.grpo.sandboxes import task_starter

    from .test_training_support import make_tasks

    task = make_tasks(tmp_path / "tasks")["hello-file"]
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("timeout_sec = 60", "timeout_sec = 2"))
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\nsleep 30\necho 1 > /logs/verifier/reward.txt\n"
    )
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, task_starter("podman"), EpisodeConfig())
        episode.reset(task_dir=str(task))
        episode.run("echo hello > /app/hello.txt")
        record = loop.run(episode._finish())
        assert (record.reward, record.fault) == (None, "task"), record
        assert "VerifierTimeoutError" in (record.error or "")
    finally:
        loop.stop()


# -- a real TRL step with one infrastructure episode -------------------------------------------

tiny_model = grpo_tests.tiny_model  # the warmed-up tiny policy, as this module's fixture
needs_train = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("trl") is None,
    reason="the train extra is not installed (pip install -e '.[train]'): torch/trl missing",
)


@pytest.mark.train
@needs_train
def test_grpo_job_with_an_infrastructure_episode_completes(engine_ready, tiny_model, tmp_path):
    """The worker process refuses its first sandbox start: that episode is dropped from its
    group (TRL gets None), counted with its reason, and the training step still runs."""
    from autoenvscaling.training.backend import TrainProgress
    from autoenvscaling.training.checkpoints import CheckpointRegistry
    from autoenvscaling.training.grpo.trl_backend import TRLGRPOBackend

    class FaultyWorker(TRLGRPOBackend):
        worker_module = "tests.fault_injection"

    repo = Path(__file__).resolve().parents[1]
    events: list[TrainProgress] = []
    backend = FaultyWorker(
        CheckpointRegistry(tmp_path / "registry"),
        env={FAULT_ENV: "1", "PYTHONPATH": str(repo)},
    )
    job = grpo_tests._job(tiny_model, tmp_path, steps=1)
    result = asyncio.run(backend.train(job, events.append))
    assert result.steps_done == 1, result
    metrics = result.metrics
    assert (metrics["episodes"], metrics["episodes_scored"]) == (8, 7), metrics
    assert (metrics["episodes_infrastructure"], metrics["episodes_task_fault"]) == (1, 0)
    assert "EngineUnavailableError" in metrics["episodes_not_scored_reasons"]
    batches = [e.metrics for e in events if e.stage == "rewards"]
    rewards = [r for batch in batches for r in batch["rewards"]]
    assert sum(r is None for r in rewards) == 1, rewards
    assert sum(batch["episodes_infrastructure"] for batch in batches) == 1
    scored = [r for r in rewards if r is not None]
    # TRL left the None out: its logged mean is the mean of the scored episodes, not a NaN or
    # a mean with a made-up 0, and the loss it trained on is a number.
    (logged,) = [h for h in metrics["log_history"] if "reward" in h]
    assert math.isclose(logged["reward"], sum(scored) / len(scored), rel_tol=1e-5)
    assert math.isfinite(metrics["train_loss"])
