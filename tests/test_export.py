"""`export pool`: a scripted-model flywheel run's pool as a Harbor dataset that Harbor's own CLI
runs (oracle, our sandbox backend) to 1.0 on every task, with validity cards that say what the
stored verdicts say."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner

from autoenvscaling.graphs.agent.scripted_model import register
from autoenvscaling.graphs.config import FlywheelContext
from autoenvscaling.graphs.flywheel.builder import build_flywheel
from autoenvscaling.tools.export import read_card
from autoenvscaling.tools.gate import Verdict
from autoenvscaling.tools.trials.trial import ENVIRONMENTS

from .conftest import FIXTURES
from .flywheel_policy import shared_policy

BACKEND = "podman"  # the default engine


async def _scripted_run(tmp_path: Path) -> Path:
    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    ctx = FlywheelContext(
        run_dir=str(tmp_path / "run"),
        rounds=1,
        proposals=2,
        arm="error_feedback",
        policy_model=register("export-policy", shared_policy()),
        seed_dir=str(seed),
        train=False,
        max_revisions=1,
        refresh_attempts=2,
        calibration_rollouts=4,
        solver_max_turns=3,
        proposer_max_turns=4,
        backend=BACKEND,
    )
    graph = build_flywheel(checkpointer=InMemorySaver())
    await graph.ainvoke(
        {"rounds": 1}, {"configurable": {"thread_id": "t"}, "recursion_limit": 500}, context=ctx
    )
    return tmp_path / "run"


def _harbor_rewards(dataset: Path, jobs: Path) -> dict[str, float | None]:
    """`harbor run` (Harbor's own CLI) with the oracle over the dataset: task -> reward."""
    environment = ENVIRONMENTS[BACKEND]["import_path"]
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("harbor")),
            "run",
            "-p",
            str(dataset),
            "-a",
            "oracle",
            "-e",
            environment,
            "-n",
            "2",
            "-o",
            str(jobs),
            "-y",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HARBOR_TELEMETRY": "0"},
        check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    rewards: dict[str, float | None] = {}
    for path in jobs.rglob("result.json"):
        result = json.loads(path.read_text())
        if "verifier_result" not in result:
            continue  # the job's own summary
        verifier = result.get("verifier_result") or {}
        rewards[result["task_name"]] = (verifier.get("rewards") or {}).get("reward")
    return rewards


@pytest.mark.timeout(900)
async def test_exported_pool_runs_under_harbor_and_cards_match_verdicts(engine_ready, tmp_path):
    from harbor.models.dataset.manifest import DatasetManifest
    from harbor.publisher.packager import Packager

    from autoenvscaling.cli.main import app

    run = await _scripted_run(tmp_path)
    out = tmp_path / "dataset"
    # Refresh may retire a task the scripted solver finds too easy; export the whole pool.
    result = CliRunner().invoke(
        app, ["export", "pool", str(run), "--out", str(out), "--include-retired", "--json"]
    )
    assert result.exit_code == 0, result.output
    exported = json.loads(result.stdout)

    # Harbor's own model reads the manifest; every digest is Harbor's hash of the task folder.
    manifest = DatasetManifest.from_toml_file(out / "dataset.toml")
    tasks = {t.name: t.digest for t in manifest.tasks}
    assert len(tasks) == 2  # the seed task and the one admitted proposal
    for task in exported["tasks"]:
        folder = Path(task["path"])
        assert tasks[task["name"]] == f"sha256:{Packager.compute_content_hash(folder)[0]}"
        assert read_card(folder).content_hash == tasks[task["name"]]

    # The card of the admitted task says what the stored verdicts say, stage by stage.
    proposed = [t for t in exported["tasks"] if t["card"]["source"] == "proposed"]
    assert len(proposed) == 1
    card = read_card(Path(proposed[0]["path"]))
    stem = card.task_id.removeprefix("r01-")
    verdict = Verdict.model_validate_json(
        (run / "candidates" / "r01" / f"{stem}.verdict.json").read_text()
    )
    precheck = Verdict.model_validate_json(
        (run / "candidates" / "r01" / f"{stem}.precheck.json").read_text()
    )
    assert card.gated and card.admitted is verdict.admitted is True
    by_stage = {s.stage: s for s in card.stages}
    assert list(by_stage) == [s.stage for s in verdict.stages]
    early = {s.stage: s for s in precheck.stages}
    for stage in verdict.stages:
        source = early[stage.stage] if stage.skipped and stage.stage in early else stage
        assert (by_stage[stage.stage].passed, by_stage[stage.stage].reason) == (
            source.passed,
            source.reason,
        )
    details = {s.stage: s.details for s in [*precheck.stages, *verdict.stages] if not s.skipped}
    assert card.oracle_reward == details["oracle"]["reward"] == 1.0
    assert card.nop_reward == details["nop"]["reward"] == 0.0
    assert card.determinism_rewards == details["repeat"]["rewards"]
    probes = card.anti_cheat
    ran = {n: r for n, r in details["anti_cheat"]["probes"].items() if not r["skipped"]}
    assert set(probes) == set(ran) and {"leak", "forge", "near_miss"} <= set(probes)
    assert probes["leak"].leaks == 0 and probes["leak"].files_scanned
    assert probes["forge"].reward == ran["forge"]["reward"] == 0.0
    assert all(p.passed for p in probes.values())  # an admitted task withstood every probe
    assert all(p.reward < 0.5 for p in probes.values() if p.reward is not None)
    assert card.calibration is not None
    assert card.calibration.pass_rate == details["calibrate"]["mean"] == 0.5
    assert card.nearest is not None and card.nearest.task == "word-count"
    assert card.nearest.similarity == details["dedup"]["closest"]["similarity"]
    assert card.proposal is not None and card.proposal.round == 1
    assert card.proposal.model and "export-policy" in card.proposal.model
    seed_card = next(t["card"] for t in exported["tasks"] if t["card"]["source"] == "seed")
    assert seed_card["gated"] is False and seed_card["stages"] == []

    # `harbor view RUN_DIR --jobs` reads the run's trials folder as one job: its scanner lists
    # and parses every trial the gate ran.
    from harbor.viewer.scanner import JobScanner

    scanner = JobScanner(run)
    trials = scanner.list_trials("trials")
    assert trials and all(scanner.get_trial_result("trials", t) for t in trials)

    # Harbor's own CLI accepts the folder as a local dataset and the oracle solves every task.
    rewards = _harbor_rewards(out, tmp_path / "jobs")
    assert rewards == dict.fromkeys(rewards, 1.0) and len(rewards) == 2, rewards
