"""The `anti_cheat` stage: the gate hacks every task before admitting it.

Each probe is a real Harbor trial with a probe agent; they run concurrently:

- `audit` (`audit.OracleAuditAgent`): the oracle, then the leak search (image files exact and
  normalised, archives, git objects reachable or not, the instruction) and the near misses
  (wrong answers derived from the oracle's outputs, judged by the task's own tests).
- `exploits` (`probes.TamperAgent`): no work, only tampering: `forge` the reward files, `stub`
  the programs the verifier runs that the agent can write, `shadow` the modules the test runner
  imports from its working directory, write the `status` files the instruction mentions, and
  the isolation probes: the `tamperer` (a process left running that tampers with /tests, the
  outputs and the reward while the verifier runs) and `interpreters` (always-pass python3/pytest
  wrappers on PATH). They run together in one trial; only when the combination scores are they
  run one by one, to name the weakness. The probes of the agent's work (real programs that write
  the reward: `program` in place of the programs the tests run, `git` config in the work's
  repositories, `customize` modules on the tests' python path) run on every verifier mode: the
  verifier gets the work either way. `program` runs after `stub` and rewrites the same files
  with programs that also exit 0, so the combined trial still meets what `stub` aims at.
- the `cheat_agent` (a model told to get the reward without doing the task; off unless
  configured).

The isolation probes run by default (`GateConfig.tamperer_probe`/`tamper_interpreters` =
"auto") on every task whose verifier is separate: the agent's container, with its processes and
wrappers, is gone before the tests run in a fresh one, so a task there can defend and the probes
are the regression test of that protection. A task whose verifier shares the agent's container
cannot defend itself against them; there they do not run, and the sub-results and the stage's
reason say so ("not run: the verifier shares the agent's container"), so reports can count it.

Every probe's sub-result is kept under `details["probes"]`, so reports can count which probe
rejects most; the stage's reason is the first rejecting probe's. How each probe's trial is judged is
judges.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any

from ...tasks.format import load_task
from ...trials.faults import trial_failure
from ...trials.trial import TrialOutcome
from ...trials.verifier import VerifierMode, verifier_mode
from ..config import GateConfig, IsolationProbe, StageName
from ..harness import gate_trial
from ..results import StageResult
from .cheat_agent import solver_cheat_kwargs
from .exploits import executed_image_files, plan
from .judges import (
    ProbeResult,
    judge_cheat,
    judge_exploit,
    judge_leak,
    judge_near_miss,
    probe_reward,
    trial_info,
)

__all__ = ["PROBES", "ProbeResult", "anti_cheat", "executed_image_files"]

Prior = Mapping[StageName, StageResult]

AUDIT = "autoenvscaling.tools.gate.anti_cheat.audit:OracleAuditAgent"
TAMPER = "autoenvscaling.tools.gate.anti_cheat.probes:TamperAgent"
CHEAT = "autoenvscaling.tools.gate.anti_cheat.cheat_agent:CheatAuditAgent"
EXPLOIT_MODES = (
    "forge",
    "stub",
    "shadow",
    "status",
    "tamperer",
    "interpreters",
    "program",
    "git",
    "customize",
)
#: Every probe, in the order their rejections are reported.
PROBES = ("leak", *EXPLOIT_MODES, "near_miss", "cheat_agent")

ISOLATION_MODES = ("tamperer", "interpreters")
#: Why an isolation probe did not run on a task with a shared verifier.
SHARED_VERIFIER = "the verifier shares the agent's container"


# --------------------------------------------------------------------------- the stage


async def anti_cheat(task: Path, config: GateConfig, prior: Prior) -> StageResult:
    loaded = load_task(task)  # lint admitted it; a format error here is a bug worth raising
    workdir = loaded.config.environment.workdir or "/app"
    artifacts = [a if isinstance(a, str) else a.source for a in loaded.config.artifacts]
    target = plan(task, loaded.instruction, workdir, artifacts)
    threshold = config.nop_threshold
    exploit_kwargs = target.model_dump()
    verifier = verifier_mode(task)
    not_run = {
        "stub": None if target.stub_paths else "nothing for the stub probe to aim at",
        "shadow": None if target.shadow_modules else "nothing for the shadow probe to aim at",
        "status": None if target.status_files else "nothing for the status probe to aim at",
        "program": None if target.stub_paths else "nothing for the program probe to aim at",
        "tamperer": _isolation_skip("tamperer_probe", config.tamperer_probe, verifier),
        "interpreters": _isolation_skip(
            "tamper_interpreters", config.tamper_interpreters, verifier
        ),
    }
    modes = [m for m in EXPLOIT_MODES if not_run.get(m) is None]
    # On a separate verifier nothing the isolation probes leave outside the work reaches the
    # tests, so they cannot spoil the others' attack and share their trial. Forced onto a shared
    # verifier (wrappers that break the tests' own python), each gets a trial of its own.
    together = [m for m in modes if verifier == "separate" or m not in ISOLATION_MODES]

    def tamper(label: str, *chosen: str) -> Coroutine[Any, Any, TrialOutcome]:
        return gate_trial(
            task,
            config,
            agent=TAMPER,
            label=label,
            agent_kwargs={**exploit_kwargs, "modes": list(chosen)},
        )

    trials: dict[str, Coroutine[Any, Any, TrialOutcome]] = {
        "audit": gate_trial(
            task,
            config,
            agent=AUDIT,
            label="audit",
            agent_kwargs={
                "task_dir": str(task),
                "min_bytes": config.leak_min_bytes,
                "near_miss": config.near_miss,
                "max_variants": config.max_near_misses,
                "threshold": threshold,
            },
        ),
        "exploits": tamper("exploits", *together),
        **{f"exploit:{m}": tamper(m, m) for m in modes if m not in together},
    }
    cheat_agent = _cheat_agent(config)
    if cheat_agent is not None:
        trials["cheat_agent"] = gate_trial(
            task, config, agent=CHEAT, label="cheat-agent", agent_kwargs=cheat_agent
        )
    outcomes = dict(zip(trials, await asyncio.gather(*trials.values()), strict=True))
    # The combination scored: run each exploit alone to name the weakness.
    split = len(together) > 1 and probe_reward(outcomes["exploits"]) >= threshold
    if split:
        alone = await asyncio.gather(*(tamper(f"exploit-{m}", m) for m in together))
        outcomes.update({f"exploit:{m}": o for m, o in zip(together, alone, strict=True)})

    trial_details = {name: trial_info(o) for name, o in outcomes.items()}
    for name, outcome in outcomes.items():
        # The cheat agent is a policy (its model may fail, its timeout is its own); the probes
        # are scripted like the task's own solution.
        fault = trial_failure(outcome, actor="policy" if name == "cheat_agent" else "reference")
        if fault is not None and not fault.task_fault:
            return StageResult.infrastructure(
                "anti_cheat",
                f"the {name} probe trial failed: {fault.describe()}",
                trials=trial_details,
            )
    audit = outcomes["audit"]
    if "leaks" not in audit.agent_metadata:
        return StageResult.infrastructure(
            "anti_cheat",
            "the audit probe reported nothing (it did not finish)",
            trials=trial_details,
        )

    results: dict[str, ProbeResult] = {"leak": judge_leak(audit)}
    if config.near_miss:
        results["near_miss"] = judge_near_miss(audit, threshold)
    else:
        results["near_miss"] = ProbeResult(
            probe="near_miss", passed=True, skipped=True, reason="near misses off (config)"
        )
    for mode in EXPLOIT_MODES:
        if mode not in modes:
            results[mode] = ProbeResult(
                probe=mode, passed=True, skipped=True, reason=f"not run: {not_run[mode]}"
            )
            continue
        own = outcomes.get(f"exploit:{mode}", outcomes["exploits"])
        result = judge_exploit(mode, own, threshold)
        if mode in together and not split:
            result.details["combined_with"] = together
        results[mode] = result
    if "cheat_agent" in outcomes:
        results["cheat_agent"] = judge_cheat(outcomes["cheat_agent"], audit, config)
    else:
        results["cheat_agent"] = ProbeResult(
            probe="cheat_agent",
            passed=True,
            skipped=True,
            reason="the cheat agent did not run: "
            + (
                "no solver agent to run the cheat model with (GateConfig.solver_agent)"
                if config.cheat_model and not config.cheat_agent
                else "no cheat model configured (GateConfig.cheat_model or cheat_agent)"
            ),
        )

    details: dict[str, Any] = {
        "verifier_mode": verifier,
        "probes": {name: r.model_dump() for name, r in results.items()},
        "rejected_by": [n for n in PROBES if not results[n].passed],
        "trials": trial_details,
        "outputs": audit.agent_metadata.get("outputs", []),
    }
    failed = [results[n] for n in PROBES if not results[n].passed]
    if failed:
        first = failed[0]
        more = (
            f" (also rejected by: {', '.join(r.probe for r in failed[1:])})"
            if len(failed) > 1
            else ""
        )
        cheat = results["cheat_agent"]
        if not cheat.passed and first is not cheat:  # the hacker-fixer loop: say how it cheated
            more += f". The cheat agent also got through: {cheat.reason}"
        return StageResult(
            stage="anti_cheat",
            passed=False,
            details=details,
            excerpt=first.excerpt,
            reason=f"{first.reason}{more}",
        )
    ran = [n for n in PROBES if not results[n].skipped]
    shared = [n for n in PROBES if results[n].skipped and SHARED_VERIFIER in results[n].reason]
    skipped = [n for n in PROBES if results[n].skipped and n not in shared]
    return StageResult(
        stage="anti_cheat",
        passed=True,
        details=details,
        reason=f"{len(ran)} probes could not hack the task ({', '.join(ran)})"
        + (f"; not run: {', '.join(skipped)}" if skipped else "")
        + (f"; {', '.join(shared)}: not run: {SHARED_VERIFIER}" if shared else "")
        + f". {results['cheat_agent'].reason}" * results["cheat_agent"].skipped,
    )


def _isolation_skip(
    field: str, setting: IsolationProbe, verifier: VerifierMode | None
) -> str | None:
    """Why an isolation probe does not run on this task; None when it runs (see module doc)."""
    if setting == "off":
        return f"off (GateConfig.{field})"
    if setting == "auto" and verifier != "separate":
        return (
            f"{SHARED_VERIFIER}, so no task can defend against it there "
            f"(GateConfig.{field}='on' runs it anyway)"
        )
    return None


def _cheat_agent(config: GateConfig) -> dict[str, Any] | None:
    """Keyword arguments of the `CheatAuditAgent` trial, or None when no cheat agent is set."""
    if config.cheat_agent:
        return {"inner": config.cheat_agent, "inner_kwargs": dict(config.cheat_agent_kwargs)}
    if config.cheat_model and config.solver_agent:
        return solver_cheat_kwargs(
            config.solver_agent, config.cheat_model, config.cheat_base_url, config.cheat_max_turns
        )
    return None
