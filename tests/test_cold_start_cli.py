"""`autoenvscaling cold-start` (`make coldstart`) builds what `make run` then reuses: the embedded
preset's cold-start split, checked disjoint from the pool's seed and the held-out set. Built on
the pool's seed (as it was after the splits came in), `make run` found a cache it could not use
and paid the cold start a second time."""

from __future__ import annotations

from typer.testing import CliRunner

from autoenvscaling.cli.main import app

from .conftest import REPO


def test_the_pool_seed_is_refused_before_anything_is_built() -> None:
    pool = REPO / "tasks" / "generated" / "pool"
    result = CliRunner().invoke(app, ["cold-start", "--tasks", str(pool)])
    assert result.exit_code == 2, result.output
    assert "--tasks" in result.output and "pool_seed" in result.output, result.output
