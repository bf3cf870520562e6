"""The GRPO episode path verifies by the trial protocol: a policy that forges instead of working
gets reward 0 on the separate verifier (the training signal cannot be forged), while the same
forgery on a shared verifier scores 1.0 (the control: the attack is live on this path)."""

from __future__ import annotations

import pytest

from autoenvscaling.training.grpo.episode_env import EpisodeConfig, EventLoop, TaskEpisode
from autoenvscaling.training.grpo.sandboxes import task_starter
from tests.security.conftest import BACKEND, build_image, write_task
from tests.security.test_forgery import CHECK_PY, DOCKERFILE, TEST_SH

pytestmark = [pytest.mark.timeout(600)]

FORGE = [
    # A python3 wrapper that writes the reward, and a writer that keeps reward.json at 1.0.
    "printf '#!/bin/sh\\necho 1.0 > /logs/verifier/reward.txt\\n' > /usr/local/bin/python3",
    "chmod +x /usr/local/bin/python3",
    "mkdir -p /logs/verifier; setsid bash -c 'while :; do [ -e /logs/verifier/reward.json ] || "
    'echo "{\\"reward\\": 1.0}" > /logs/verifier/reward.json; sleep 0.01; done\' '
    "</dev/null >/dev/null 2>&1 &",
]
HONEST = ["awk '{s += $1} END {print s}' /app/numbers.txt > /app/sum.txt"]


def test_episode_reward_comes_from_the_separate_verifier(engine_ready, tmp_path):
    image = build_image("forgery", DOCKERFILE)

    def task(mode: str):
        return write_task(
            tmp_path,
            f"sum-{mode}",
            solve="#!/bin/bash\ntrue\n",
            test_sh=TEST_SH,
            tests={"check.py": CHECK_PY},
            mode=mode,
            image=image,
        )

    separate, shared = task("separate"), task("shared")
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, task_starter(BACKEND), EpisodeConfig())

        def run(task_dir, commands) -> float | None:
            episode.reset(task_dir=str(task_dir))
            for command in commands:
                assert episode.run(command).endswith("[exit code 0]"), command
            return loop.run(episode._finish()).reward

        assert run(separate, HONEST) == 1.0
        assert run(separate, FORGE) == 0.0
        assert run(shared, FORGE) == 1.0  # control: the wrapper forges a shared verifier
    finally:
        loop.stop()


# -- GRPO like a trial: the reward's range, and a sandbox the policy kills ----------------------
HUGE_TEST_SH = """\
    #!/bin/bash
    # A hostile (or careless) verifier: a number with no 'reward' key, far out of range.
    mkdir -p /logs/verifier
    echo '{"score": 1e30}' > /logs/verifier/reward.json
    """
# Ends every process of the container but init and the caller: the keep-alive with them, so the
# container stops. A policy about to score 0 could do this to have its episode dropped instead.
KILL_SANDBOX = ["kill -KILL -1; sleep 1; echo still-here"]


def _episode_runner(loop):
    episode = TaskEpisode(loop, task_starter(BACKEND), EpisodeConfig())

    def run(task_dir, commands):
        episode.reset(task_dir=str(task_dir))
        for command in commands:
            episode.run(command)
        return loop.run(episode._finish())

    return run


def test_an_episode_reward_is_range_checked_like_a_trials(engine_ready, tmp_path):
    """A reward a trial refuses (no 'reward' key, 1e30) is the task's fault, never a reward."""
    image = build_image("forgery", DOCKERFILE)
    huge = write_task(
        tmp_path, "huge", solve="#!/bin/bash\ntrue\n", test_sh=HUGE_TEST_SH, image=image
    )
    loop = EventLoop()
    try:
        record = _episode_runner(loop)(huge, [])
        assert (record.reward, record.fault) == (None, "task"), record
        assert "reward" in (record.error or ""), record
    finally:
        loop.stop()


def test_a_policy_that_kills_its_own_sandbox_scores_0(engine_ready, tmp_path):
    """Killing the sandbox inside a tool call is the policy's doing: 0, not an infrastructure
    drop (which would spare it the 0); the next episode runs normally."""
    image = build_image("forgery", DOCKERFILE)
    honest = write_task(
        tmp_path,
        "sum",
        solve="#!/bin/bash\ntrue\n",
        test_sh=TEST_SH,
        tests={"check.py": CHECK_PY},
        image=image,
    )
    loop = EventLoop()
    try:
        run = _episode_runner(loop)
        record = run(honest, KILL_SANDBOX)
        assert (record.reward, record.fault) == (0.0, None), record
        # (Where the container's keeper is out of the agent's reach the kill ends only the
        # agent's processes and the episode is simply verified: 0 either way.)
        assert record.error is None or "stopped" in record.error, record
        assert run(honest, HONEST).reward == 1.0  # the episode after it is unaffected
    finally:
        loop.stop()


def test_an_oversize_agent_log_does_not_cost_an_episode_its_reward(engine_ready, tmp_path):
    """A 2 GB sparse file in /logs/agent (Harbor fetches that folder when the agent's phase ends)
    is skipped and named; the episode is verified and scored as a trial would be, not dropped."""
    image = build_image("forgery", DOCKERFILE)
    honest = write_task(
        tmp_path,
        "sum",
        solve="#!/bin/bash\ntrue\n",
        test_sh=TEST_SH,
        tests={"check.py": CHECK_PY},
        image=image,
    )
    loop = EventLoop()
    try:
        record = _episode_runner(loop)(
            honest, [*HONEST, "mkdir -p /logs/agent && truncate -s 2G /logs/agent/huge.log"]
        )
        assert (record.reward, record.fault) == (1.0, None), record
    finally:
        loop.stop()
