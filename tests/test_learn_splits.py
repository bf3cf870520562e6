"""The learning demonstration's task splits (tasks/generated/learn-train, learn-heldout) and its
preset: the generator's command writes the same bytes again, the two splits (and the cold start's
tasks) share nothing by the project's split check, every variant passes the gate's static lint,
and `run --preset learn` is the flywheel with no proposers over exactly these folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoenvscaling.graphs.config import PRESETS, REPO_TASKS, RunConfig, given_over_preset
from autoenvscaling.tools.gate.lint import lint_task
from autoenvscaling.tools.tasks.generator import SPLIT_SEEDS, main
from autoenvscaling.tools.tasks.snapshot import content_hash
from autoenvscaling.tools.tasks.splits import check_splits, task_folders

GENERATED = REPO_TASKS / "generated"
TRAIN = GENERATED / "learn-train"
HELDOUT = GENERATED / "learn-heldout"
STARTER = REPO_TASKS / "starter"
#: The issue's floor: at least 32 training and 32 held-out variants.
AT_LEAST = 32


def regenerate(out: Path, split: str, avoid: list[Path]) -> None:
    """The command tasks/generated/README.md documents for `split`, run through the CLI."""
    argv = [str(out), "--split", split, "--family", "line-count", "--per-family", "32"]
    for folder in avoid:
        argv += ["--avoid", str(folder)]
    main(argv)


def test_the_learn_splits_are_what_the_generator_writes(tmp_path: Path):
    base = [STARTER, GENERATED / "pool", GENERATED / "heldout"]
    train, heldout = tmp_path / "learn-train", tmp_path / "learn-heldout"
    regenerate(train, "learn-train", base)
    regenerate(heldout, "learn-heldout", [*base, train])
    for mine, shipped in ((train, TRAIN), (heldout, HELDOUT)):
        assert [p.name for p in task_folders(mine)] == [p.name for p in task_folders(shipped)]
        for p in task_folders(mine):
            assert content_hash(p) == content_hash(shipped / p.name), p.name
    # Each split's seeds come from its own range, apart from the embedded splits' ranges.
    ranges = [SPLIT_SEEDS[s] for s in ("pool", "heldout", "learn-train", "learn-heldout")]
    seeds = [set(r) for r in ranges]
    assert all(a.isdisjoint(b) for i, a in enumerate(seeds) for b in seeds[i + 1 :])
    for folder, split in ((TRAIN, "learn-train"), (HELDOUT, "learn-heldout")):
        assert all(
            int(p.name.rsplit("-", 1)[1]) in SPLIT_SEEDS[split] for p in task_folders(folder)
        )


def test_the_learn_splits_share_nothing_and_are_big_enough():
    check = check_splits({"cold_start": STARTER, "pool_seed": TRAIN, "heldout": HELDOUT})
    assert check.disjoint, check.summary()
    sizes = {s.name: s.tasks for s in check.splits}
    assert sizes["pool_seed"] >= AT_LEAST and sizes["heldout"] >= AT_LEAST, sizes
    # Nor with the embedded preset's generated splits (a run may name either).
    other = check_splits(
        {"learn": GENERATED / "learn-train", "pool": GENERATED / "pool", "h": GENERATED / "heldout"}
    )
    assert not other.shared_with("learn"), other.summary()


@pytest.mark.parametrize("split", [TRAIN, HELDOUT], ids=["learn-train", "learn-heldout"])
def test_every_learn_variant_passes_the_gate_lint(split: Path):
    """The gate's static stage on each variant (the trial stages, oracle 1.0 and nop 0.0, were
    run once on all of them: tasks/generated/README.md)."""
    failing = {}
    for task in task_folders(split):
        report = lint_task(task, backend="podman", needs_solution=True)
        if not report.ok:
            failing[task.name] = [f.message for f in report.findings]
    assert not failing, failing


def test_the_learn_preset_is_the_flywheel_without_proposers_on_these_splits():
    config = RunConfig(**PRESETS["learn"])
    assert (config.seed_dir, config.heldout_dir) == (str(TRAIN), str(HELDOUT))
    assert config.cold_start_tasks == str(STARTER)  # the embedded cold start, built once
    assert config.proposals == 0 and not config.proposer_training
    assert config.refresh_attempts == 0 and config.baseline_tasks == 0
    assert config.heldout_samples >= 1 and config.train_steps >= 1
    assert config.policy_server == "embedded"
    # The command line wins over the preset; what it leaves unset comes from the preset.
    values = given_over_preset({"train_steps": 8, "heldout_samples": None}, "learn")
    assert (values["train_steps"], values["heldout_samples"]) == (8, 2)
    with pytest.raises(KeyError, match="unknown preset 'lern'; presets: embedded, gpu, learn"):
        given_over_preset({}, "lern")


def test_an_unknown_preset_is_a_usage_error(tmp_path: Path):
    from typer.testing import CliRunner

    from autoenvscaling.cli.main import app

    argv = ["run", "--preset", "lern", "--run-dir", str(tmp_path / "r")]
    result = CliRunner().invoke(app, argv, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert "unknown preset 'lern'; presets: embedded, gpu, learn" in result.output
    assert not (tmp_path / "r").exists()  # refused before the run folder exists
