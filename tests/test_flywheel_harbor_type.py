"""One whole flywheel round on a Harbor environment type other than our engines, with a scripted
policy (only the model's replies; the workspace, gate, trials and verifiers are real).

Every sandbox of the round is reached only through Harbor's `BaseEnvironment` methods: the
proposer's workspace (its terminal over `exec`, the candidate folder mirrored in and out), the
gate (build, oracle, nop, repeat, anti_cheat with our cheat agent, calibration by our solver,
dedup), the pool's refresh. `exec-only-podman` (tests/exec_only_env.py) is our podman environment
with nothing to attach to; `harbor:podman` is Harbor's own type, driven as a cloud type is, and
runs where its compose frontend does (podman >= 4.7's `podman compose`, or podman-compose >= 1.1:
Debian bookworm's podman-compose 1.0.3 lacks `--in-pod` and `down --rmi`, which Harbor passes).
Harbor's podman type enforces no-network only through its egress-control sidecar (an alpine image
from Docker Hub); where no registry answers it refuses no-network environments, so there the
round's proposer uses the error-feedback arm (no workspace: it would be refused) and writes a
task with the default network.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call

from .conftest import FIXTURES
from .exec_only_env import exec_only_backend
from .flywheel_policy import FILES, FIX, blocks

#: The same task with Harbor's default network (for a type that cannot enforce no-network).
PUBLIC = {**FILES, "task.toml": FILES["task.toml"].replace('network_mode = "no-network"\n', "")}


def harbor_podman_missing() -> str | None:
    """Why Harbor's podman type cannot start an environment here; None when it can."""
    if shutil.which("podman") is None:
        return "podman is not installed"
    from harbor.environments.docker.runtime import resolve_podman_runtime

    compose = resolve_podman_runtime().compose
    if compose[0] == "podman-compose" or compose[:2] == ("podman", "compose"):
        probe = subprocess.run([*compose[:2], "--help"], capture_output=True, text=True)
        help_text = probe.stdout + probe.stderr
        if compose[0] == "podman-compose" and "--in-pod" not in help_text:
            return "podman-compose is older than 1.1 (no --in-pod): pip install podman-compose"
        if probe.returncode == 0:
            return None
    return f"no working podman compose frontend ({' '.join(compose)})"


def no_network_enforced() -> bool:
    """Whether Harbor's podman type can start an environment without network here."""
    from harbor.environments.podman import PodmanEnvironment

    return PodmanEnvironment._egress_control_kernel_support()


def policy(files: dict[str, str]) -> Callable[[Sequence[BaseMessage]], AIMessage | str]:
    """The proposer looks around its workspace, writes a task with the filesystem tools, checks
    in the terminal that the files arrived, and submits; the solver solves every other episode
    (calibration measures 0.5); the cheat agent looks and gives up."""
    solver_episodes = itertools.count()

    def respond(messages: Sequence[BaseMessage]) -> AIMessage | str:
        system = str(messages[0].content) if isinstance(messages[0], SystemMessage) else ""
        mine = [m for m in messages if isinstance(m, AIMessage)]
        if "in a single reply" in system:
            return blocks(files)  # a one-reply arm
        if "expert author of benchmark tasks" in system:
            steps = [
                lambda: reply("", tool_call("run", command="pwd; mkdir -p notes; ls -A")),
                lambda: reply(
                    "", *(tool_call("write_file", path=p, content=c) for p, c in files.items())
                ),
                lambda: reply(
                    "", tool_call("run", command="wc -l < environment/numbers.txt; rmdir notes")
                ),
                lambda: reply("Submit.", tool_call("submit", summary="sum a column")),
            ]
            return steps[len(mine)]() if len(mine) < len(steps) else "done"
        if "skilled terminal agent" in system:  # the solver
            if mine:
                return "Done."
            if next(solver_episodes) % 2 == 0:
                return reply("", tool_call("run", command=f"{FIX} > /app/sum.txt"))
            return reply("", tool_call("run", command="ls"))
        if not mine:  # the cheat agent
            return reply("", tool_call("run", command="cd /app && ls"))
        return "I found no shortcut."

    return respond


@pytest.mark.slow
@pytest.mark.serial  # Harbor's podman type under the parallel tier's load: see the Makefile
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("kind", ["exec-only-podman", "harbor:podman"])
async def test_one_flywheel_round_on_a_harbor_type(kind, engine_ready, tmp_path, monkeypatch):
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.builder import build_flywheel
    from autoenvscaling.tools.rollouts.store import RolloutStore
    from autoenvscaling.tools.tasks.pool import Pool

    files, arm = FILES, "terminal"
    if kind == "harbor:podman":
        # The dev extra's podman-compose (>= 1.1) sits beside this interpreter, not on PATH.
        monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        if why := harbor_podman_missing():
            pytest.skip(f"Harbor's podman type cannot run here: {why}")
        backend = kind
        # This host's podman starts no container with its default ulimits (above the hard
        # limit): the same machine configuration our engine uses, as a user's containers.conf.
        from autoenvscaling.tools.sandbox.engine import containers_conf

        monkeypatch.setenv("CONTAINERS_CONF", str(containers_conf()))
        if not no_network_enforced():
            files, arm = PUBLIC, "error_feedback"
    else:
        backend = exec_only_backend(monkeypatch)
    model = register(f"harbor-type-round-{kind}", policy(files))
    # The cheat agent on the same scripted policy (GateConfig reads it from the environment).
    monkeypatch.setenv("AUTOENVSCALING_GATE_CHEAT_MODEL", model)
    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    ctx = FlywheelContext(
        run_dir=str(tmp_path / "run"),
        rounds=1,
        proposals=1,
        arm=arm,
        backend=backend,
        policy_model=model,
        seed_dir=str(seed),
        train=False,
        max_revisions=0,
        proposer_max_turns=6,
        solver_max_turns=2,
        baseline_tasks=0,
        calibration_rollouts=2,
        refresh_attempts=1,
    )
    graph = build_flywheel(checkpointer=InMemorySaver())
    final = await graph.ainvoke(
        {"rounds": 1}, {"configurable": {"thread_id": "t"}, "recursion_limit": 500}, context=ctx
    )

    [record] = [c for c in final["candidates"] if c.round == 1]
    assert record.admitted and record.proposer_reward == 1.0, record
    verdict = json.loads(open(record.path + ".verdict.json").read())
    stages = {s["stage"]: s for s in verdict["stages"]}
    for stage in ("build", "oracle", "nop", "repeat", "anti_cheat", "calibrate"):
        assert stages[stage]["passed"] and not stages[stage]["skipped"], stages[stage]
    cheat = stages["anti_cheat"]["details"]["probes"]["cheat_agent"]
    assert cheat["reward"] == 0.0, cheat  # it ran, over exec, and scored nothing
    assert stages["calibrate"]["details"]["mean"] == 0.5

    run = tmp_path / "run"
    assert record.task_id in [e.task_id for e in Pool(run / "pool").entries()]
    with RolloutStore(run / "rollouts.db") as store:
        attempts = store.list_attempts(limit=1000)
        [proposer] = [a for a in attempts if a.role == "proposer"]
        runs = [s for s in store.trajectory(proposer.id).steps if s.tool_name == "run"]
    if arm == "terminal":
        outputs = [json.loads(s.tool_output or "{}") for s in runs]  # the terminal's results
        # The workspace: the candidate's folder, the host's writes reach it, its own come back.
        assert outputs[0]["output"] == "/workspace/task\nnotes\n"
        assert (outputs[1]["output"], outputs[1]["exit_code"]) == ("5\n", 0)
        assert not (run / "pool" / record.task_id / "notes").exists()
    purposes = [a.metadata.get("purpose") for a in attempts if a.role == "solver"]
    assert purposes.count("calibration") == 2 and purposes.count("refresh") == 2  # 2 pool tasks
    solver = [a for a in attempts if a.role == "solver"]
    assert all(a.metadata.get("backend") == backend for a in solver if a.metadata.get("backend"))
    assert all(a.outcome in ("solved", "failed") for a in solver), [a.outcome for a in solver]
    metrics = json.loads((run / "reports" / "metrics.json").read_text())[0]
    assert (metrics["admitted"], metrics["solver_attempts"]) == (1, 2)
