"""The gate against a corpus of broken tasks (tests/fixtures/gate_tasks/), one planted defect
each: every one is rejected at the stage that owns the defect, with a reason that names it.

The whole corpus runs once, concurrently, through the batch graph (real Harbor trials on podman);
each case then only reads its verdict.
"""

from __future__ import annotations

import asyncio

import pytest

from autoenvscaling.graphs.validation.builder import validate_batch
from autoenvscaling.tools.gate import GateConfig, Verdict, validate_task

from .conftest import FIXTURES

GATE_TASKS = FIXTURES / "gate_tasks"

# fixture folder -> (rejecting stage, words the reason must contain)
EXPECTED: dict[str, tuple[str, tuple[str, ...]]] = {
    "invalid_toml": ("lint", ("task.toml", "invalid TOML")),
    "missing_test_sh": ("lint", ("tests/test.sh", "missing")),
    "unnamed_output": ("lint", ("/app/summary.txt", "never names it")),
    "build_fails": ("build", ("does not build", "missing-dataset.csv")),
    "failing_oracle": ("oracle", ("oracle scored 0", "not exactly 1.0")),
    "verifier_hangs": ("oracle", ("verifier did not finish", "timeout_sec")),
    "passes_initial_state": ("nop", ("pass on the initial state", "scored 1")),
    "no_reward_written": ("nop", ("no reward written", "set -e")),
    "expected_output_in_image": (
        "anti_cheat",
        ("/usr/share/misc/.wordfreq-cache", "expected output", "/app/top_words.txt"),
    ),
    "verifier_runs_image_file": ("anti_cheat", ("/opt/grader/grade.sh", "stub")),
    "heldout_copy": ("decontam", ("13-gram", "benchmark-word-histogram", "treat hyphenated words")),
    "near_duplicate": ("dedup", ("near-duplicate", "csv-column-sum")),
}
ADMITTED = ("good_task",)  # the control: the same scaffolding without a defect


def corpus_config() -> GateConfig:
    return GateConfig(
        pool_dir=GATE_TASKS / "_pool",
        heldout_dirs=[GATE_TASKS / "_heldout"],
        concurrency=4,
        trial_concurrency=4,
    )


@pytest.fixture(scope="module")
def corpus(engine_ready) -> dict[str, Verdict]:
    tasks = [GATE_TASKS / name for name in EXPECTED] + [FIXTURES / name for name in ADMITTED]
    events: list[dict] = []
    verdicts = asyncio.run(validate_batch(tasks, corpus_config(), on_event=events.append))
    assert [e for e in events if e["event"] == "verdict"], "no progress events were streamed"
    return {v.task_name: v for v in verdicts}


def test_the_corpus_covers_every_fixture_folder():
    folders = {p.name for p in GATE_TASKS.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert folders == set(EXPECTED) | {"flaky_verifier"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_planted_defect_is_rejected_at_its_stage(corpus, name):
    stage, words = EXPECTED[name]
    verdict = corpus[name]
    assert (verdict.admitted, verdict.stage) == (False, stage), verdict.summary()
    assert verdict.proposer_reward == -1.0 and not verdict.infrastructure_error
    for word in words:
        assert word in verdict.reason, f"{word!r} not in: {verdict.reason}"
    # The gate stopped at the first failure: nothing after the rejecting stage ran.
    assert verdict.stages[-1].stage == stage


def test_the_control_task_is_admitted_with_every_stage_timed(corpus):
    verdict = corpus["good_task"]
    assert verdict.admitted and verdict.proposer_reward == 1.0, verdict.summary()
    assert verdict.stage is None and verdict.skipped == ["calibrate"]
    assert set(verdict.timings) == {
        "lint",
        "build",
        "oracle",
        "nop",
        "repeat",
        "anti_cheat",
        "decontam",
        "dedup",
    }
    nop = next(r for r in verdict.stages if r.stage == "nop")
    assert nop.details["reward"] == 0.0  # the exact score is recorded


def test_failing_output_is_excerpted_for_the_proposer(corpus):
    assert "expected ['the 5'" in corpus["failing_oracle"].excerpt  # the verifier's own words
    assert "cannot stat" in corpus["build_fails"].excerpt
    assert "VerifierTimeoutError" in corpus["verifier_hangs"].excerpt


async def test_a_flaky_verifier_is_caught_and_named(engine_ready):
    # Passes half the time (/dev/urandom): with 11 oracle runs the chance that all agree is
    # 2 * 2**-11; the first run decides whether oracle or repeat reports it.
    config = GateConfig(repeat=10, trial_concurrency=4)
    verdict = await validate_task(GATE_TASKS / "flaky_verifier", config)
    assert not verdict.admitted and verdict.stage in ("oracle", "repeat"), verdict.summary()
    assert "flaky verifier" in verdict.reason and verdict.proposer_reward == -1.0
