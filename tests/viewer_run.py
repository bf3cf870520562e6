"""A run folder for the viewer's tests, written by the code paths a run writes it with.

The flywheel itself runs `setup` and `inspect` (no model is called: no baseline) and stops at
its fan-out, so the manifest, pool, rollout store and the checkpointer's `graph.sqlite` (round
1, `propose_one` slots 0 and 1 pending) are the run's own. The round's other records come from
the writers a round uses: conversations as LangChain messages turned into steps
(`steps_from_messages`) and transcripts (`chat_messages`), the rollout store's `record_attempt`,
verdicts from `make_verdict` over `StageResult`s, Harbor's `TrialResult` for trial folders,
`save_history` / `round_markdown` for the reports. Model-written text is hostile throughout: a
`<script>` in the task's title, a file name and a tool output.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from autoenvscaling.graphs.agent.loop import steps_from_messages
from autoenvscaling.tools.gate.results import StageResult, make_verdict
from autoenvscaling.tools.report.activity import RoleActivity
from autoenvscaling.tools.report.metrics import RoundMetrics
from autoenvscaling.tools.report.run_report import round_markdown, save_history
from autoenvscaling.tools.rollouts.models import Attempt
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.rollouts.transcripts import Transcript, chat_messages, save_transcript
from autoenvscaling.tools.run_dir import RunDir

from .conftest import FIXTURES

#: What a model might write, each marking which place it came from when it runs.
SCRIPT_TITLE = '<script>window.__pwned = "title"</script>Count the words'
SCRIPT_FILE = "<img src=x onerror=\"window.__pwned='file'\">.txt"
SCRIPT_OUTPUT = '</pre><script>window.__pwned = "output"</script><b>bold?</b>'
SCRIPT_TASK = "<svg onload=\"window.__pwned='task'\">"


@dataclass
class ViewerRun:
    root: Path
    admitted: str
    rejected: str
    proposer: dict[str, str] = field(default_factory=dict)
    refresh: str = ""
    calibration: list[str] = field(default_factory=list)
    trials: list[Path] = field(default_factory=list)


async def start_flywheel(root: Path, seed: Path) -> None:
    """The real flywheel up to its proposers' fan-out, checkpointed in root/graph.sqlite."""
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.builder import build_flywheel, checkpoint_serde

    root.mkdir(parents=True, exist_ok=True)
    ctx = FlywheelContext(
        run_dir=str(root),
        rounds=2,
        proposals=2,
        train=False,
        seed_dir=str(seed),
        baseline_tasks=0,
        # Set, so the embedded preset's held-out split stays out: these pages show the trials
        # and decontam settings the test wrote (tests/test_flywheel_heldout.py shows held-out).
        heldout_dir=None,
        heldout_samples=0,
    )
    async with aiosqlite.connect(root / "graph.sqlite") as conn:
        graph = build_flywheel(checkpointer=AsyncSqliteSaver(conn, serde=checkpoint_serde()))
        await graph.ainvoke(
            {"rounds": 2},
            {"configurable": {"thread_id": "flywheel"}},
            context=ctx,
            interrupt_before=["propose_one"],
            durability="sync",
        )


def _record(store: RolloutStore, attempt: Attempt, messages: list[Any], run: RunDir) -> str:
    store.record_attempt(attempt, steps_from_messages(messages, {}))
    save_transcript(
        run.rollouts, Transcript(attempt_id=attempt.id, messages=chat_messages(messages))
    )
    return attempt.id


def _call(name: str, args: dict[str, Any], i: int) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call-{i}"}


def _proposer(store: RolloutStore, run: RunDir, run_id: str, name: str, admitted: bool) -> str:
    """A proposer attempt of two episodes: write, rejected, edit, resubmit."""
    first = "# Count lines\nCount the lines of /app/input.txt.\n"
    messages: list[Any] = [
        SystemMessage("You write Harbor tasks."),
        HumanMessage("The brief: write one task."),
        AIMessage(
            "",
            tool_calls=[_call("write_file", {"path": "instruction.md", "content": first}, 1)],
        ),
        ToolMessage("wrote 2 lines", tool_call_id="call-1", name="write_file"),
        AIMessage("", tool_calls=[_call("submit", {}, 2)]),
        ToolMessage("rejected at oracle", tool_call_id="call-2", name="submit"),
        HumanMessage("Revision 1 of 2: the gate rejected your task at oracle: reward 0."),
        AIMessage(
            "",
            tool_calls=[
                _call(
                    "edit_file",
                    {"path": "instruction.md", "old_text": "Count lines", "new_text": SCRIPT_TITLE},
                    3,
                ),
                _call("run", {"command": "ls /app"}, 4),
            ],
        ),
        ToolMessage("edited", tool_call_id="call-3", name="edit_file"),
        ToolMessage(SCRIPT_OUTPUT, tool_call_id="call-4", name="run"),
        AIMessage("", tool_calls=[_call("submit", {}, 5)]),
        ToolMessage("submitted", tool_call_id="call-5", name="submit"),
    ]
    attempt = Attempt(
        id=f"proposer-{name}",
        run_id=run_id,
        round=1,
        role="proposer",
        task_id=name,
        category="text-processing",
        reward=1.0 if admitted else -1.0,
        outcome="solved" if admitted else "failed",
        turns=4,
        finished_at=datetime.now(UTC),
        metadata={"revisions": 1, "submitted": True, "admitted": admitted},
    )
    return _record(store, attempt, messages, run)


def _solver(
    store: RolloutStore,
    run: RunDir,
    run_id: str,
    *,
    id: str,
    task: str,
    round_: int,
    purpose: str,
    reward: float,
    output: str = "3 words\n",
    tags: dict[str, Any] | None = None,
) -> str:
    messages: list[Any] = [
        SystemMessage("You solve terminal tasks."),
        HumanMessage("Count the words of /app/input.txt into /app/out.txt."),
        AIMessage("I will count.", tool_calls=[_call("run", {"command": "wc -w /app/in"}, 1)]),
        ToolMessage(output, tool_call_id="call-1", name="run"),
        AIMessage("Done."),
    ]
    attempt = Attempt(
        id=id,
        run_id=run_id,
        round=round_,
        role="solver",
        task_id=task,
        reward=reward,
        outcome="solved" if reward >= 1 else "failed",
        turns=2,
        started_at=datetime.now(UTC) - timedelta(seconds=30),
        finished_at=datetime.now(UTC),
        metadata={"purpose": purpose, **(tags or {})},
    )
    return _record(store, attempt, messages, run)


def start_trial(run: RunDir, relative: str, task: Path, log: str) -> Path:
    """A Harbor trial folder as it is while the agent runs: its config, logs, no result yet."""
    from harbor.models.trial.config import TrialConfig

    folder = run.trials / relative
    (folder / "agent").mkdir(parents=True)
    config = TrialConfig(task={"path": str(task)}, trial_name=folder.name, trials_dir=folder.parent)
    (folder / "config.json").write_text(config.model_dump_json(indent=2))
    (folder / "agent" / "agent.log").write_text(log)
    (folder / "trial.log").write_text("trial started\n")
    return folder


def finish_trial(folder: Path, task: Path, reward: float) -> Path:
    """The verifier's files and result.json, written by Harbor's own model."""
    from harbor.models.task.id import LocalTaskId
    from harbor.models.trial.config import TrialConfig
    from harbor.models.trial.result import AgentInfo, TrialResult
    from harbor.models.verifier.result import VerifierResult

    (folder / "verifier").mkdir()
    (folder / "verifier" / "reward.txt").write_text(f"{reward}\n")
    (folder / "verifier" / "test-stdout.txt").write_text(f"1 passed\n{SCRIPT_OUTPUT}\n")
    result = TrialResult(
        task_name=task.name,
        trial_name=folder.name,
        trial_uri=folder.as_uri(),
        task_id=LocalTaskId(path=task),
        task_checksum="0" * 64,
        config=TrialConfig.model_validate_json((folder / "config.json").read_text()),
        agent_info=AgentInfo(name="autoenvscaling-solver", version="1"),
        verifier_result=VerifierResult(rewards={"reward": reward}),
    )
    (folder / "result.json").write_text(result.model_dump_json(indent=2))
    return folder


def _trial(run: RunDir, relative: str, task: Path, reward: float, log: str) -> Path:
    return finish_trial(start_trial(run, relative, task, log), task, reward)


def _candidate(run: RunDir, name: str) -> Path:
    folder = run.candidates(1) / name
    shutil.copytree(FIXTURES / "good_task", folder)
    instruction = folder / "instruction.md"
    instruction.write_text(f"# {SCRIPT_TITLE}\n\n" + instruction.read_text())
    (folder / "environment" / SCRIPT_FILE).write_text("one two three\n")
    return folder


def _stages(run: RunDir, name: str, calibration: list[str]) -> list[StageResult]:
    oracle = run.trials / name / "oracle" / f"{name}__oracle1"
    return [
        StageResult(
            stage="lint",
            passed=True,
            reason="no lint errors (1 warnings)",
            details={
                "findings": [
                    {
                        "rule": "image-shares-test-file",
                        "severity": "warning",
                        "file": f"environment/{SCRIPT_FILE}",
                        "line": 3,
                        "message": f"COPY {SCRIPT_FILE}: identical to a test file",
                    }
                ]
            },
        ),
        StageResult(stage="build", passed=True, reason="built", details={"image": f"aes/{name}"}),
        StageResult(
            stage="oracle",
            passed=True,
            reason="the reference solution scores 1.0",
            details={"reward": 1.0, "trial_dir": str(oracle)},
        ),
        StageResult(
            stage="nop", passed=True, reason="an empty attempt scores 0", details={"reward": 0.0}
        ),
        StageResult(
            stage="repeat",
            passed=True,
            reason="the oracle scored 1 in all 3 runs",
            details={"rewards": [1.0, 1.0, 1.0]},
        ),
        StageResult(
            stage="anti_cheat",
            passed=True,
            reason="2 probes could not hack the task",
            details={
                "probes": {
                    "leak": {
                        "probe": "leak",
                        "passed": True,
                        "reward": None,
                        "reason": "no answer readable",
                    },
                    "forge": {
                        "probe": "forge",
                        "passed": True,
                        "reward": 0.0,
                        "reason": SCRIPT_OUTPUT,
                    },
                }
            },
        ),
        StageResult.skip("decontam", "not configured: no held-out benchmark was given").model_copy(
            update={"details": {"status": "not_configured"}}
        ),
        StageResult(
            stage="calibrate",
            passed=True,
            reason="solver mean reward 0.50 over 4 rollouts is in [0.25, 0.75]",
            details={
                "rewards": [0.0, 1.0, 0.0, 1.0],
                "mean": 0.5,
                "band": [0.25, 0.75],
                "attempts": [
                    {"attempt_id": a, "reward": r}
                    for a, r in zip(calibration, [0, 1, 0, 1], strict=True)
                ],
            },
        ),
        StageResult(
            stage="dedup",
            passed=True,
            reason="closest pool task word-count has similarity 0.02 < 0.80",
            details={"closest": {"key": str(run.pool / "word-count"), "similarity": 0.0234}},
        ),
    ]


def _grpo_result(run: RunDir, round_: int, rewards: list[float | None]) -> None:
    """The solver's GRPO worker result for a round, as the worker leaves it (one episode a
    reward; None: not scored)."""
    from autoenvscaling.training.grpo.episode_env import EpisodeRecord
    from autoenvscaling.training.worker_protocol import RESULT_FILE, WorkerResult

    work = run.root / "train" / f"r{round_:02d}"
    work.mkdir(parents=True)
    episodes = [
        EpisodeRecord(
            task_dir=str(run.pool / "word-count"),
            reward=r,
            fault=None if r is not None else "infrastructure",
        ).model_dump(mode="json")
        for r in rewards
    ]
    result = WorkerResult(job_id=f"r{round_:02d}", episodes=episodes, metrics={"reward_mean": 0.75})
    (work / RESULT_FILE).write_text(result.model_dump_json(indent=2))


def history(rounds: int) -> list[RoundMetrics]:
    """Finished rounds; round 2 scored no candidate and ran no GRPO update (values missing),
    round 3 has numbers again."""
    out = [
        RoundMetrics(
            round=1,
            candidates=2,
            scored=2,
            admitted=1,
            valid_environment_rate=0.5,
            cost_per_valid_environment=0.02,
            solver_mean_reward_pool=0.5,
            pool_active=2,
            training={"reward_mean": 0.75, "proposer": {"rewards": [[1.0, -1.0]]}},
            agent_activity=[RoleActivity(role="proposer", attempts=2, submitted=2, admitted=1)],
            warnings=["the solver never called a tool in 2 of 4 attempts"],
            served={"proposer": "base", "solver": "ck-0001"},
        ),
        RoundMetrics(round=2, candidates=1, pool_active=2, pool_retired=1),
        RoundMetrics(
            round=3, candidates=2, scored=2, admitted=2, valid_environment_rate=1.0, pool_active=4
        ),
    ]
    return out[:rounds]


async def build_run(root: Path, tmp: Path) -> ViewerRun:
    seed = tmp / "seed"
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    await start_flywheel(root, seed)
    run = RunDir(root)
    run_id = run.manifest().run_id
    run.add_lineage({"round": 1, "checkpoint": "ck-0001", "parent": None, "kind": "lora"})
    out = ViewerRun(root=root, admitted="cand-aaaaaaaaaaaa", rejected="cand-bbbbbbbbbbbb")
    with RolloutStore(run.rollouts) as store:
        out.calibration = [
            _solver(
                store,
                run,
                run_id,
                id=f"calib-{i}",
                task=f"r01-{out.admitted}",
                round_=1,
                purpose="calibration",
                reward=float(i % 2),
                tags={"candidate": f"r01-{out.admitted}"},
            )
            for i in range(4)
        ]
        out.refresh = _solver(
            store,
            run,
            run_id,
            id="refresh-1",
            task=SCRIPT_TASK,
            round_=1,
            purpose="refresh",
            reward=0.0,
            output=SCRIPT_OUTPUT,
        )
        for name, admitted in ((out.admitted, True), (out.rejected, False)):
            folder = _candidate(run, name)
            out.proposer[name] = _proposer(store, run, run_id, name, admitted)
            stages = _stages(run, name, out.calibration)
            if not admitted:  # the oracle fails; later stages never ran
                stages = [
                    *stages[:2],
                    StageResult(
                        stage="oracle",
                        passed=False,
                        reason="the reference solution scores 0.0 < 1",
                        excerpt=SCRIPT_OUTPUT,
                        details={"reward": 0.0},
                    ),
                ]
            verdict = make_verdict(folder, stages)
            folder.with_name(f"{name}.verdict.json").write_text(verdict.model_dump_json(indent=2))
        out.trials = [
            _trial(
                run,
                f"{out.admitted}/oracle/{out.admitted}__oracle1",
                run.pool / "word-count",
                1.0,
                "solve.sh ran\n",
            ),
            _trial(run, "word-count__refresh1", run.pool / "word-count", 0.0, SCRIPT_OUTPUT),
        ]
    _grpo_result(run, 1, [0.0, 1.0, 1.0, 1.0, None])  # one episode lost to infrastructure
    metrics = history(3)
    save_history(run.reports, metrics)
    (run.reports / "round-01.md").write_text(round_markdown(metrics[0]))
    return out


def build_run_sync(root: Path, tmp: Path) -> ViewerRun:
    """`build_run` from synchronous code, in its own thread: Playwright's sync API keeps an
    event loop running on the test's thread."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, build_run(root, tmp)).result()
