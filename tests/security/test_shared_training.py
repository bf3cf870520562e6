"""A shared-verifier task enters training only when its reward cannot be forged by design.

On a shared verifier the tests run in the agent's container: a root agent replaces python3 and
scores 1.0 with no work (the control, a real GRPO episode on the default engine). Such a task
is left out of a GRPO job unless the user opts in (AUTOENVSCALING_TRAIN_SHARED_VERIFIER); the
same task with an unprivileged agent (`[agent] user = "nobody"`) is kept, and there the same
forgery scores 0. Before this test's fix every shared task entered the job.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoenvscaling.tools.settings import get_settings
from autoenvscaling.training.backend import TrainHyperParams, TrainJob
from autoenvscaling.training.grpo.episode_env import EpisodeConfig, EventLoop, TaskEpisode
from autoenvscaling.training.grpo.sandboxes import task_starter
from autoenvscaling.training.grpo.worker import step_plan
from tests.security.conftest import BACKEND, build_image, write_task
from tests.security.test_forgery import CHECK_PY, DOCKERFILE, TEST_SH

pytestmark = [pytest.mark.timeout(600)]

# A python3 wrapper earlier on PATH: the tests' checker never runs, the wrapper writes 1.0.
FORGE = [
    "printf '#!/bin/sh\\necho 1.0 > /logs/verifier/reward.txt\\n' > /usr/local/bin/python3 "
    "&& chmod +x /usr/local/bin/python3"
]


def _job(tmp_path: Path, tasks: list[Path]) -> TrainJob:
    return TrainJob(
        job_id="shared-training",
        base_model="none",
        task_dirs=tasks,
        hyper=TrainHyperParams(steps=1, tasks_per_step=len(tasks), num_generations=2),
        work_dir=tmp_path / "job",
    )


def test_a_forgeable_shared_verifier_task_stays_out_of_training(
    engine_ready, tmp_path, monkeypatch
):
    image = build_image("forgery", DOCKERFILE)

    def task(name: str, agent_user: str | None) -> Path:
        path = write_task(
            tmp_path,
            name,
            solve="#!/bin/bash\ntrue\n",
            test_sh=TEST_SH,
            tests={"check.py": CHECK_PY},
            mode="shared",
            image=image,
        )
        if agent_user:
            toml = path / "task.toml"
            toml.write_text(
                toml.read_text().replace("[agent]\n", f'[agent]\nuser = "{agent_user}"\n')
            )
        return path

    root_agent, nobody_agent = task("shared-root", None), task("shared-nobody", "nobody")
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, task_starter(BACKEND), EpisodeConfig())

        def forge(task_dir: Path) -> float | None:
            episode.reset(task_dir=str(task_dir))
            for command in FORGE:
                episode.run(command)
            return loop.run(episode._finish()).reward

        assert forge(root_agent) == 1.0  # control: the forgery is live with a root agent
        assert forge(nobody_agent) == 0.0  # an unprivileged agent cannot replace python3
    finally:
        loop.stop()

    job = _job(tmp_path, [root_agent, nobody_agent])
    planned = {Path(t).name for step in step_plan(job) for t in step}
    assert planned == {"shared-nobody"}, planned
    monkeypatch.setenv("AUTOENVSCALING_TRAIN_SHARED_VERIFIER", "1")
    get_settings.cache_clear()
    try:
        opted = {Path(t).name for step in step_plan(_job(tmp_path, [root_agent])) for t in step}
        assert opted == {"shared-root"}, opted
    finally:
        monkeypatch.delenv("AUTOENVSCALING_TRAIN_SHARED_VERIFIER")
        get_settings.cache_clear()
