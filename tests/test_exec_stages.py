"""Our stages where there is no live sandbox to attach to (any Harbor environment type): the
solver's terminal runs over the environment's `exec` with the terminal's behaviour, in a real trial
scored by the task's own verifier."""

from __future__ import annotations

import pytest

from autoenvscaling.graphs.agent.loop import LoopBudget
from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call
from autoenvscaling.graphs.models import ModelConfig
from autoenvscaling.graphs.solver.attempt import SolverSettings, solve_task
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.sandbox.harbor_backends import check_stages, offers

from .conftest import FIXTURES, SEED_DIR
from .exec_only_env import exec_only_backend

TASK = FIXTURES / "good_task"
SOLVE = (TASK / "solution" / "solve.sh").read_text()


@pytest.mark.timeout(300)
async def test_solver_attempt_over_exec_keeps_state_and_is_scored(
    engine_ready, tmp_path, monkeypatch
):
    backend = exec_only_backend(monkeypatch)
    assert "attach" not in offers(backend)
    check_stages(backend, ["solve", "propose", "gate:calibrate/our_solver"])  # none refused
    model = register(
        "exec-solver",
        [
            reply("", tool_call("run", command="cd /tmp && export WHERE=here")),
            reply("", tool_call("run", command="pwd; echo $WHERE; whoami")),
            reply("", tool_call("run", command="echo begin; sleep 3; echo end", timeout_sec=1)),
            reply("", tool_call("read_output", timeout_sec=20)),
            reply("", tool_call("run", command=f"cd /app && {SOLVE}")),
            "Done.",
        ],
    )
    settings = SolverSettings(
        model=ModelConfig(model=model),
        store_path=str(tmp_path / "rollouts.db"),
        run_id="exec",
        budget=LoopBudget(max_turns=8),
    )
    attempt = await solve_task(TASK, settings, backend=backend, trials_dir=tmp_path)
    assert (attempt.reward, attempt.outcome, attempt.steps) == (1.0, "solved", 5), attempt.error
    with RolloutStore(tmp_path / "rollouts.db") as store:
        steps = [s for s in store.trajectory(attempt.rollout_id).steps if s.tool_name]
    assert steps[1].tool_output.startswith("/tmp\nhere\nroot\n")  # cwd and exports carried
    assert "begin" in steps[2].tool_output and "still running" in steps[2].tool_output
    assert "end" in steps[3].tool_output and steps[3].exit_code == 0


@pytest.mark.timeout(300)
async def test_proposer_workspace_on_a_harbor_type_mirrors_the_candidate(
    engine_ready, tmp_path, monkeypatch
):
    """The proposer's terminal on a Harbor type: a workspace environment of that type, the
    candidate folder copied in before a command and back after it; hostile entries it makes in
    the sandbox (a link out, a FIFO, a setuid bit) never reach the host folder."""
    from mcp.shared.memory import create_connected_server_and_client_session

    from autoenvscaling.graphs.proposer.workspace import workspace_with_task
    from autoenvscaling.mcp_servers.terminal import build_terminal_server
    from autoenvscaling.tools.sandbox import SandboxLimits
    from autoenvscaling.tools.sandbox.engine import client

    from .test_mcp_terminal import mine

    backend = exec_only_backend(monkeypatch)
    api = client(engine_ready).api
    before = {c["Id"] for c in mine(api)}
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "instruction.md").write_text("hi\n")
    opener = workspace_with_task(candidate, SandboxLimits(memory_mb=512), backend)
    server = build_terminal_server(opener)

    async def run(session, command):
        result = await session.call_tool("run", {"command": command, "timeout_sec": 30})
        assert not result.isError, result.content[0].text
        return result.structuredContent

    async with create_connected_server_and_client_session(server._mcp_server) as session:
        made = await run(
            session,
            "pwd; cat instruction.md; mkdir tests && echo 'echo ok' > tests/test.sh && "
            "chmod 4755 tests/test.sh && ln -s /etc/passwd leak && mkfifo pipe",
        )
        assert made["exit_code"] == 0 and made["output"].startswith("/workspace/task\nhi\n")
        assert len({c["Id"] for c in mine(api)} - before) == 1  # the workspace environment
        assert (candidate / "tests" / "test.sh").read_text() == "echo ok\n"
        assert not (candidate / "tests" / "test.sh").stat().st_mode & 0o6000
        assert not (candidate / "leak").is_symlink() and not (candidate / "pipe").exists()
        assert "not copied back" in made["output"] and "leak" in made["output"]
        # What the filesystem tools write on the host is what the next command sees.
        (candidate / "solution").mkdir()
        (candidate / "solution" / "solve.sh").write_text("echo s\n")
        (candidate / "instruction.md").unlink()
        seen = await run(session, "cat solution/solve.sh; ls -A")
        assert seen["output"] == "echo s\nsolution\ntests\n"
    assert {c["Id"] for c in mine(api)} == before  # stopped with the session


@pytest.mark.timeout(600)
async def test_cheat_agent_over_exec_is_caught_by_what_it_wrote(engine_ready, monkeypatch):
    """The cheat agent (our solver's agent with the cheat prompt) on a Harbor type: its terminal
    runs over `exec`, its hack scores, and the files it wrote (listed as root through `exec`)
    reject the task."""
    from autoenvscaling.tools.gate import GateConfig, run_stage

    backend = exec_only_backend(monkeypatch)
    hack = register(
        "exec-cheat",
        [
            reply("", tool_call("run", command="cd /app && export OUT=counts.json")),
            reply("", tool_call("run", command="echo '[]' > $OUT")),
            "I wrote an empty JSON array instead of counting.",
        ],
    )
    from autoenvscaling.graphs.solver.attempt import SOLVER_AGENT

    config = GateConfig(
        backend=backend,
        cheat_model=hack,
        solver_agent=SOLVER_AGENT,
        near_miss=False,
        tamperer_probe="off",
    )
    assert "gate:anti_cheat/cheat_agent" in config.sandbox_stages()
    hacked = await run_stage("anti_cheat", FIXTURES / "hack_tasks" / "json_shape_only", config)
    assert not hacked.passed and not hacked.infrastructure_error, hacked.reason
    assert hacked.details["rejected_by"] == ["cheat_agent"], hacked.details["rejected_by"]
    assert hacked.details["probes"]["cheat_agent"]["reward"] == 1.0
    assert "wrote /app/counts.json" in hacked.reason  # cwd and the export carried over


LAMPS = SEED_DIR / "tk-lamp-panel"
START_LAMPS = (
    "DISPLAY=:99 setsid python3 /opt/lamp-panel/lamp_panel.py >/dev/null 2>&1 </dev/null & "
    "for i in $(seq 100); do DISPLAY=:99 xdotool search --onlyvisible --name '^Lamp panel$' "
    ">/dev/null && break; sleep 0.1; done; sleep 1; echo up"
)


@pytest.mark.timeout(300)
async def test_desktop_tools_over_exec_served_and_trained(engine_ready, tmp_path, monkeypatch):
    """A computer-use task on a type with nothing to attach to: the served solver's desktop
    tools and a GRPO desktop episode's act through the environment's `exec`, and read the same
    screen (before, they answered 'no desktop' there)."""
    from autoenvscaling.training.grpo.desktop_episode import DesktopTaskEpisode
    from autoenvscaling.training.grpo.episode_env import EpisodeConfig, EventLoop
    from autoenvscaling.training.grpo.sandboxes import task_starter

    backend = exec_only_backend(monkeypatch)
    model = register(
        "exec-desktop",
        [
            reply("", tool_call("screenshot")),
            reply("", tool_call("run", command=START_LAMPS)),
            reply("", tool_call("key", keys="Tab")),
            "Done.",
        ],
    )
    settings = SolverSettings(
        model=ModelConfig(model=model),
        store_path=str(tmp_path / "rollouts.db"),
        run_id="exec-desktop",
        budget=LoopBudget(max_turns=5),
    )
    attempt = await solve_task(LAMPS, settings, backend=backend, trials_dir=tmp_path)
    with RolloutStore(tmp_path / "rollouts.db") as store:
        steps = [s for s in store.trajectory(attempt.rollout_id).steps if s.tool_name]
    shot, started, pressed = (s.tool_output or "" for s in steps)
    assert shot.startswith("[screenshot 1024x768 PNG, ") and "[image image/png]" in shot, shot
    assert started.startswith("up"), started
    assert pressed.startswith('[pressed Tab; active window: "Lamp panel"'), pressed

    real = task_starter("podman")

    class ExecOnly:  # what task_starter gives for a Harbor type: an environment, no `sandbox`
        def __init__(self, live):
            self.environment, self.agent_user, self._live = live.environment, None, live

        async def open_shell(self):
            from autoenvscaling.tools.sandbox.exec_shell import ExecShell

            return ExecShell(self.environment)

        async def close(self):
            await self._live.close()

    async def start(task_dir):
        return ExecOnly(await real(task_dir))

    loop = EventLoop()
    try:
        episode = DesktopTaskEpisode(loop, start, EpisodeConfig())
        episode.reset(task_dir=str(LAMPS))
        trained = episode.screenshot()
        assert trained.startswith("[screenshot 1024x768 PNG, "), trained
        assert episode.run(START_LAMPS).startswith("up")
        assert 'active window: "Lamp panel"' in episode.screenshot()
        assert episode.failure is None
        loop.run(episode._close())
    finally:
        loop.stop()
