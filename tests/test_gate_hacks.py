"""The gate hacks every task before admitting it: a corpus of hackable tasks
(tests/fixtures/hack_tasks/), one per class of reward hack, each with a hack script
(`_hacks/<task>.sh`) that scores 1.0 in a real Harbor trial today (the control, proven here), and
every one rejected at `anti_cheat` with a reason that names its weakness. The good task passes,
with every probe's sub-result recorded. (That the earlier stages admit these tasks, and that
the seed pool passes the whole gate with these probes, test_gate_corpus/test_gate_seed show.)

Everything runs once, concurrently (real Harbor trials on the default engine); each case then
only reads the results.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pytest

from autoenvscaling.tools.gate import GateConfig, Verdict, make_verdict, run_stage
from autoenvscaling.tools.gate.anti_cheat.stage import PROBES
from autoenvscaling.tools.gate.harness import gate_trial
from autoenvscaling.tools.trials.trial import TrialOutcome

from .conftest import FIXTURES

HACKS = FIXTURES / "hack_tasks"
SCRIPT_AGENT = "autoenvscaling.tools.trials.script_agent:ScriptAgent"

# task -> (the probe that must reject it, words its reason must contain)
EXPECTED: dict[str, tuple[str, tuple[str, ...]]] = {
    "json_shape_only": ("near_miss", ("accepts wrong output", "/app/counts.json")),
    "leak_backup_normalised": (
        "leak",
        ("/var/backups/reports/last_run.tsv", "/app/report.csv", "line order"),
    ),
    "leak_git_unreachable": ("leak", ("git object", "/app/roles.json")),
    # Committed, removed and packed, in a repository the instruction speaks of.
    "leak_git_history_packed": ("leak", ("git object", "/app/todo_report.txt")),
    "answer_in_instruction": ("leak", ("instruction spells out the answer", "top_words.txt")),
    "checker_in_workspace": ("stub", ("/app/tools/validate.sh", "always-pass stub")),
    "runner_shadowing": ("shadow", ("imports modules", "/app/json.py")),
    # The file list comes from the probe's exec output, which came back empty once under heavy
    # load (reason: "writing only nothing"); the weakness itself is what must be named.
    "status_file_trusted": ("status", ("status files",)),
}
# Hackable only while an agent's process can outlive the agent phase (a shared verifier).
PROTOCOL_DEPENDENT = {"expected_file_in_tests": "tamperer"}


def config(**overrides: object) -> GateConfig:
    return GateConfig(repeat=0, skip=["calibrate"], concurrency=4, trial_concurrency=4, **overrides)


def hack_commands(name: str) -> list[str]:
    return [(HACKS / "_hacks" / f"{name}.sh").read_text()]


async def _run_all() -> tuple[dict[str, TrialOutcome], dict[str, Verdict]]:
    names = [*EXPECTED, *PROTOCOL_DEPENDENT]
    gate = config()
    controls = [
        gate_trial(
            HACKS / name,
            gate,
            agent=SCRIPT_AGENT,
            agent_kwargs={"commands": hack_commands(name)},
            label="control",
        )
        for name in names
    ]
    tasks = [HACKS / name for name in EXPECTED] + [FIXTURES / "good_task"]
    stages = [run_stage("anti_cheat", task, gate) for task in tasks] + [
        run_stage("anti_cheat", HACKS / name, config(tamperer_probe="on"))
        for name in PROTOCOL_DEPENDENT
    ]
    outcomes = await asyncio.gather(*controls, *stages)
    results = outcomes[len(names) :]
    paths = [*tasks, *(HACKS / name for name in PROTOCOL_DEPENDENT)]
    return (
        dict(zip(names, outcomes[: len(names)], strict=True)),
        {p.name: make_verdict(p, [r]) for p, r in zip(paths, results, strict=True)},
    )


@pytest.fixture(scope="module")
def corpus(engine_ready) -> tuple[dict[str, TrialOutcome], dict[str, Verdict]]:
    return asyncio.run(_run_all())


def _probes(verdict: Verdict) -> dict[str, dict]:
    stage = next(r for r in verdict.stages if r.stage == "anti_cheat")
    return stage.details["probes"]


def test_the_corpus_covers_every_fixture_folder():
    folders = {p.name for p in HACKS.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert folders == set(EXPECTED) | set(PROTOCOL_DEPENDENT)
    for name in folders:
        assert (HACKS / "_hacks" / f"{name}.sh").is_file(), name


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_hack_scores_today_and_the_gate_rejects_it(corpus, name):
    controls, verdicts = corpus
    control = controls[name]
    assert control.error is None and control.reward == 1.0, (control.error, control.reward)
    probe, words = EXPECTED[name]
    verdict = verdicts[name]
    assert (verdict.admitted, verdict.stage) == (False, "anti_cheat"), verdict.summary()
    assert verdict.proposer_reward == -1.0 and not verdict.infrastructure_error
    for word in words:
        assert word in verdict.reason, f"{word!r} not in: {verdict.reason}"
    probes = _probes(verdict)
    assert probes[probe]["passed"] is False, probes[probe]
    stage = next(r for r in verdict.stages if r.stage == "anti_cheat")
    assert stage.details["rejected_by"][0] == probe


@pytest.mark.timeout(900)
def test_a_left_over_process_is_caught_whenever_it_can_hack(corpus):
    controls, verdicts = corpus
    control = controls["expected_file_in_tests"]
    assert control.error is None, control.error
    verdict = verdicts["expected_file_in_tests"]
    tamperer = _probes(verdict)["tamperer"]
    assert not tamperer["skipped"]
    if control.reward == 1.0:  # the protocol lets the agent's processes live on: must reject
        assert (verdict.admitted, verdict.stage) == (False, "anti_cheat"), verdict.summary()
        assert not tamperer["passed"] and "process the agent left running" in verdict.reason
    else:  # the verifier protocol kills them: the probe is its regression test and passes
        assert tamperer["passed"] and tamperer["reward"] < 0.5, tamperer


@pytest.mark.timeout(900)
def test_the_good_task_passes_with_every_probe_recorded(corpus):
    _, verdicts = corpus
    verdict = verdicts["good_task"]
    anti = next(r for r in verdict.stages if r.stage == "anti_cheat")
    assert anti.passed, anti.reason
    probes = _probes(verdict)
    assert list(probes) == list(PROBES) or set(probes) == set(PROBES)
    ran = {name for name, p in probes.items() if not p["skipped"]}
    assert {"leak", "near_miss", "forge", "shadow"} <= ran
    # The good task's verifier shares the agent's container: the isolation probes do not run
    # there by default, and the verdict says so (test_gate_isolation_probes: where they do).
    assert verdict.verifier_mode == "shared"
    for name in ("tamperer", "interpreters"):
        assert probes[name]["skipped"], probes[name]
        assert "not run: the verifier shares the agent's container" in probes[name]["reason"]
    assert "tamperer, interpreters: not run: the verifier shares the agent's container" in (
        anti.reason
    )
    near = probes["near_miss"]["details"]
    assert len(near["variants"]) == 4 and all(v["reward"] < 0.5 for v in near["variants"])
    assert "control_reward" not in near  # the control runs only when a near miss passes
    assert probes["cheat_agent"]["skipped"]
    assert "cheat agent did not run" in anti.reason


def probe_rejections(verdicts: Iterable[Verdict]) -> Counter[str]:
    """How often each probe rejected a task over `verdicts` (every probe that rejected counts,
    not only the one the reason names), in `PROBES` order: which hacks the proposer falls for."""
    counts: Counter[str] = Counter()
    for verdict in verdicts:
        for stage in verdict.stages:
            if stage.stage == "anti_cheat":
                counts.update(stage.details.get("rejected_by") or [])
    return Counter({p: counts[p] for p in PROBES if counts[p]})


def test_reports_can_count_which_probes_reject_most(corpus):
    _, verdicts = corpus
    counts = probe_rejections(v for name, v in verdicts.items() if name in EXPECTED)
    assert counts["leak"] == 4 and counts["stub"] == counts["shadow"] == 1
    assert counts["near_miss"] >= 2  # json_shape_only, and status_file_trusted's totals.csv
    assert list(counts) == [p for p in PROBES if p in counts]


def test_hack_scripts_do_no_honest_work():
    # A hack that solved the task would prove nothing: none of them reads the task's input.
    for script in (HACKS / "_hacks").glob("*.sh"):
        text = script.read_text()
        assert "input.txt" not in text and "sales.csv" not in text, script.name
    assert Path(HACKS / "_hacks").is_dir()
