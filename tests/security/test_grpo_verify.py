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

        def run(task_dir, commands) -> float:
            episode.reset(task_dir=str(task_dir))
            for command in commands:
                assert episode.run(command).endswith("[exit code 0]"), command
            return loop.run(episode._finish()).reward

        assert run(separate, HONEST) == 1.0
        assert run(separate, FORGE) == 0.0
        assert run(shared, FORGE) == 1.0  # control: the wrapper forges a shared verifier
    finally:
        loop.stop()
