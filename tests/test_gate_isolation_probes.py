"""anti_cheat's isolation probes — a process the agent leaves running (the tamperer) and
always-pass interpreter wrappers — run by default on every task whose verifier is separate, and
the gate says where they did not run.

The task is the hack corpus's `expected_file_in_tests` (its expected output sits in tests/, and
its tests leave a one-second window before they compare): a process alive while the verifier
runs copies the answer into place and rewrites the reward. Our engine's own defence, ending the
agent's processes before a shared verifier (`EngineEnvironment.end_agent_processes`, what
Harbor's cloud types do not have), is switched off here, so what stands between the tamperer and
the tests is the verifier protocol alone:

- a copy on the separate verifier (as the proposer's tasks and the seed pool are), default
  configuration: both probes run (in the combined exploit trial), score below 0.5, and the task
  passes anti_cheat with their sub-results in the verdict;
- the original on the shared verifier with the tamperer forced on: the live process wins and the
  gate rejects the task naming it (the probe has teeth; "auto" would not have run it there).

That a shared-verifier task's verdict says the probes did not run, and why, test_gate_hacks
shows on its good task. Real Harbor trials on the default engine, run once, concurrently.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from autoenvscaling.tools.gate import GateConfig, Verdict, make_verdict, run_stage
from autoenvscaling.tools.sandbox.harbor_env import EngineEnvironment
from autoenvscaling.tools.trials.verifier import default_to_separate, verifier_mode

from .conftest import FIXTURES

TASK = FIXTURES / "hack_tasks" / "expected_file_in_tests"


def config(**overrides: Any) -> GateConfig:
    return GateConfig(repeat=0, skip=["calibrate"], trial_concurrency=4, **overrides)


async def _no_reaping(self: EngineEnvironment) -> int:
    return 0  # the agent's processes live on, as on a backend that cannot end them


async def _run(separate: Path) -> dict[str, Verdict]:
    runs = {
        "separate": (separate, config()),
        "shared_forced": (TASK, config(tamperer_probe="on")),
    }
    results = await asyncio.gather(*(run_stage("anti_cheat", t, c) for t, c in runs.values()))
    return {
        name: make_verdict(task, [result])
        for (name, (task, _)), result in zip(runs.items(), results, strict=True)
    }


@pytest.fixture(scope="module")
def verdicts(engine_ready, tmp_path_factory) -> dict[str, Verdict]:
    separate = tmp_path_factory.mktemp("isolation") / "expected_file_in_tests_separate"
    shutil.copytree(TASK, separate)
    assert default_to_separate(separate)
    assert (verifier_mode(separate), verifier_mode(TASK)) == ("separate", "shared")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(EngineEnvironment, "end_agent_processes", _no_reaping)
        return asyncio.run(_run(separate))


def _anti_cheat(verdict: Verdict):
    return next(r for r in verdict.stages if r.stage == "anti_cheat")


@pytest.mark.timeout(600)
def test_the_probes_run_by_default_on_a_separate_verifier_and_cannot_hack_it(verdicts):
    stage = _anti_cheat(verdicts["separate"])
    assert stage.passed, stage.reason
    assert not stage.infrastructure_error
    assert stage.details["verifier_mode"] == "separate"
    probes = stage.details["probes"]
    tamperer, interpreters = probes["tamperer"], probes["interpreters"]
    for probe in (tamperer, interpreters):
        assert not probe["skipped"] and probe["passed"] and probe["reward"] < 0.5, probe
        # One trial for every exploit: the isolation probes add no trial of their own.
        assert probe["details"]["combined_with"][0] == "forge", probe
        assert {"tamperer", "interpreters"} <= set(probe["details"]["combined_with"])
    # They really ran: the tamperer started, the wrappers were planted.
    assert "tamperer-started" in tamperer["details"]["tampered"], tamperer
    assert "/usr/local/bin/python3" in interpreters["details"]["tampered"], interpreters
    assert "tamperer" in stage.reason and "interpreters" in stage.reason
    assert "not run: the verifier shares" not in stage.reason


@pytest.mark.timeout(600)
def test_the_tamperer_wins_where_the_verifier_does_not_defend(verdicts):
    verdict = verdicts["shared_forced"]
    assert (verdict.admitted, verdict.stage) == (False, "anti_cheat"), verdict.summary()
    assert not verdict.infrastructure_error
    stage = _anti_cheat(verdict)
    assert stage.details["verifier_mode"] == "shared"
    tamperer = stage.details["probes"]["tamperer"]
    assert not tamperer["passed"] and tamperer["reward"] >= 0.5, tamperer
    assert stage.details["rejected_by"][0] == "tamperer", stage.details["rejected_by"]
    assert "process the agent left running" in verdict.reason
    # Forced onto a shared verifier it runs in a trial of its own, not with the others.
    assert "combined_with" not in tamperer["details"]
    assert "exploit:tamperer" in stage.details["trials"]
    # The interpreter wrappers stayed on "auto": not run there, and the verdict says why.
    interpreters = stage.details["probes"]["interpreters"]
    assert interpreters["skipped"], interpreters
    assert "not run: the verifier shares the agent's container" in interpreters["reason"]


def test_the_probes_default_to_auto_which_any_backend_serves():
    assert (GateConfig().tamperer_probe, GateConfig().tamper_interpreters) == ("auto", "auto")
    # "auto" aims only at separate verifiers (the agent's container is gone, on any backend);
    # "on" also aims at shared ones, which needs a backend that ends the agent's processes.
    assert "gate:anti_cheat/tamperer" not in GateConfig(backend="harbor:modal").sandbox_stages()
    with pytest.raises(ValueError, match="anti_cheat/tamperer needs 'reap'"):
        GateConfig(backend="harbor:modal", tamperer_probe="on")
    # The fields were switches: a bool (or its text, from the environment) still means on/off.
    old = GateConfig.model_validate({"tamperer_probe": True, "tamper_interpreters": "false"})
    assert (old.tamperer_probe, old.tamper_interpreters) == ("on", "off")
    with pytest.raises(ValueError, match="tamperer_probe"):
        GateConfig.model_validate({"tamperer_probe": "sometimes"})
