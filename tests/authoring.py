"""A seed task's authoring replayed through the real proposer (MCP tools, a workspace sandbox, the
full gate; only the model's replies scripted: graphs/proposer/replay.py), for the domain tests."""

from __future__ import annotations

from pathlib import Path

from autoenvscaling.graphs.proposer.replay import authoring_files, replay_authoring
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.tasks.domains import Domain, folder_domain

from .conftest import SEED_DIR, seed_tasks


def seeds_of(domain: Domain) -> list[str]:
    """The seed pool's tasks whose tags name `domain`."""
    return [t.name for t in seed_tasks() if folder_domain(t) == domain]


async def admitted_authoring(task: Path, tmp_path: Path) -> Path:
    """Replay `task`'s authoring; assert the gate admitted it and the proposer was rewarded; the
    candidate folder the gate admitted, which holds what the proposer wrote, file for file."""
    store = tmp_path / "rollouts.db"
    result = await replay_authoring(
        task, pool_dir=SEED_DIR, store_path=store, out_dir=tmp_path / "out"
    )
    assert result.kept, result.model_dump_json(indent=1)
    assert result.reason.startswith("admitted")
    assert result.attempt_id is not None
    candidate = tmp_path / "out" / f"cand-{result.attempt_id[:12]}"
    assert sorted(authoring_files(candidate)) == sorted(authoring_files(task))
    assert folder_domain(candidate) == folder_domain(task)
    with RolloutStore(store) as rollouts:
        (attempt,) = [t.attempt for t in rollouts.iter_trajectories(role="proposer")]
    assert attempt.reward == 1.0 and attempt.metadata["admitted"] is True
    return candidate
