"""The three splits (cold start, pool seed, held-out) and the check that they share nothing;
the task-family generator that writes the shipped ones; the cold start's refusal of pool tasks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoenvscaling.graphs.cold_start.start import ColdStartTasksError, cold_start_splits
from autoenvscaling.graphs.config import PRESETS, REPO_TASKS, RunConfig
from autoenvscaling.tools.tasks.families import SKILL_FAMILIES
from autoenvscaling.tools.tasks.format import load_task
from autoenvscaling.tools.tasks.generator import FAMILIES, SPLIT_SEEDS, generate, write_split
from autoenvscaling.tools.tasks.snapshot import content_hash
from autoenvscaling.tools.tasks.splits import (
    SplitOverlapError,
    check_splits,
    require_disjoint,
    task_folders,
)

STARTER = REPO_TASKS / "starter"
POOL = REPO_TASKS / "generated" / "pool"
HELDOUT = REPO_TASKS / "generated" / "heldout"
#: The shipped splits' size: two variants of each family in each generated split.
PER_FAMILY = 2


def shipped() -> dict[str, Path]:
    return {"cold_start": STARTER, "pool_seed": POOL, "heldout": HELDOUT}


def test_the_shipped_splits_share_nothing():
    check = check_splits(shipped())
    assert check.disjoint, check.summary()
    assert [(s.name, s.tasks) for s in check.splits] == [
        ("cold_start", 8),
        ("pool_seed", PER_FAMILY * len(SKILL_FAMILIES)),
        ("heldout", PER_FAMILY * len(SKILL_FAMILIES)),
    ]
    assert check.summary().startswith("disjoint, 0 shared")


def test_the_embedded_preset_names_the_three_splits_and_decontaminates_against_heldout():
    config = RunConfig(**PRESETS["embedded"])
    assert (config.cold_start_tasks, config.seed_dir, config.heldout_dir) == tuple(
        str(p) for p in shipped().values()
    )
    assert config.heldout_samples >= 1
    assert config.decontam_sources() == [str(HELDOUT)]  # not "not configured"
    assert RunConfig().decontam_sources() == []  # no held-out, no benchmark: still said so


@pytest.mark.parametrize("how", ["copy", "renamed", "one value changed"])
def test_the_check_fails_on_an_injected_overlap(tmp_path: Path, how: str):
    pool = tmp_path / "pool"
    shutil.copytree(POOL, pool)
    leaked = task_folders(HELDOUT)[0]
    name = leaked.name if how == "copy" else "innocent-looking"
    shutil.copytree(leaked, pool / name)
    if how == "one value changed":
        dockerfile = pool / name / "environment" / "Dockerfile"
        dockerfile.write_text(dockerfile.read_text().replace("1", "7", 1))
    check = check_splits({"pool_seed": pool, "heldout": HELDOUT})
    assert not check.disjoint
    kinds = {o.check for o in check.overlaps if o.second == f"heldout/{leaked.name}"}
    assert kinds, check.summary()
    if how != "one value changed":
        assert "same_bytes" in kinds
    else:  # other bytes: the gate's text checks still see the same task
        assert kinds & {"shared_13gram", "near_duplicate"}
    assert check.summary().startswith("NOT DISJOINT")


def test_a_cold_start_on_pool_or_heldout_tasks_is_refused(tmp_path: Path):
    tasks, check = cold_start_splits(STARTER, POOL, HELDOUT)
    assert tasks == STARTER and check.disjoint
    with pytest.raises(SplitOverlapError, match="cold_start tasks share 12 task"):
        cold_start_splits(POOL, POOL, HELDOUT)  # the pool's own seed
    mixed = tmp_path / "mixed"
    shutil.copytree(STARTER, mixed)
    shutil.copytree(task_folders(HELDOUT)[3], mixed / "extra")
    with pytest.raises(SplitOverlapError, match="heldout/"):
        cold_start_splits(mixed, POOL, HELDOUT)
    with pytest.raises(ColdStartTasksError, match="--cold-start-tasks"):
        cold_start_splits(None, POOL, HELDOUT)  # the old default: the pool's seed


def test_require_disjoint_names_only_the_pairs_asked_about(tmp_path: Path):
    pool = tmp_path / "pool"
    shutil.copytree(task_folders(HELDOUT)[0], pool / "x")
    check = check_splits({"cold_start": STARTER, "pool_seed": pool, "heldout": HELDOUT})
    require_disjoint(check, "cold_start", ["pool_seed", "heldout"])  # no raise: not its overlap
    with pytest.raises(SplitOverlapError):
        require_disjoint(check, "pool_seed", ["heldout"])


def test_the_generator_is_deterministic_and_every_variant_is_a_harbor_task(tmp_path: Path):
    for family in FAMILIES:
        a, b = generate(family, 3), generate(family, 3)
        assert a == b
        assert generate(family, 4).files != a.files
        task = load_task(a.write(tmp_path))
        assert task.instruction.strip() and task.category
        assert set(a.files) == {
            "instruction.md",
            "task.toml",
            "environment/Dockerfile",
            "solution/solve.sh",
            "tests/test.sh",
        }
    with pytest.raises(KeyError, match="unknown task family"):
        generate("nope", 0)


def test_the_shipped_splits_are_what_the_generator_writes(tmp_path: Path):
    """tasks/generated/ is the generator's output, seed ranges disjoint: regenerating it gives
    the same bytes (tasks/generated/README.md has the command)."""
    assert set(SPLIT_SEEDS["pool"]).isdisjoint(SPLIT_SEEDS["heldout"])
    pool = tmp_path / "pool"
    heldout = tmp_path / "heldout"
    write_split(pool, SKILL_FAMILIES, SPLIT_SEEDS["pool"], PER_FAMILY, avoid=[STARTER])
    write_split(heldout, SKILL_FAMILIES, SPLIT_SEEDS["heldout"], PER_FAMILY, avoid=[STARTER, pool])
    for mine, shipped_folder in ((pool, POOL), (heldout, HELDOUT)):
        assert [p.name for p in task_folders(mine)] == [
            p.name for p in task_folders(shipped_folder)
        ]
        for p in task_folders(mine):
            assert content_hash(p) == content_hash(shipped_folder / p.name), p.name
