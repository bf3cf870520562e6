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
  run one by one, to name the weakness.
- the `cheat_agent` (a model told to get the reward without doing the task; off unless
  configured).

The isolation probes run by default (`GateConfig.tamperer_probe`/`tamper_interpreters` =
"auto") on every task whose verifier is separate: the agent's container, with its processes and
wrappers, is gone before the tests run in a fresh one, so a task there can defend and the probes
are the regression test of that protection. A task whose verifier shares the agent's container
cannot defend itself against them; there they do not run, and the sub-results and the stage's
reason say so ("not run: the verifier shares the agent's container"), so reports can count it.

Every probe's sub-result is kept under `details["probes"]`, so reports can count which probe
rejects most; the stage's reason is the first rejecting probe's.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Coroutine, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from autoenvscaling.tools.gate.cheat_agent import judge, solver_cheat_kwargs, summary
from autoenvscaling.tools.gate.config import GateConfig, IsolationProbe, StageName
from autoenvscaling.tools.gate.exploits import executed_image_files, plan
from autoenvscaling.tools.gate.harness import failure, failure_excerpt, gate_trial
from autoenvscaling.tools.gate.results import StageResult, Verdict
from autoenvscaling.tools.tasks.format import load_task
from autoenvscaling.tools.trials.trial import TrialOutcome
from autoenvscaling.tools.trials.verifier import VerifierMode, verifier_mode

__all__ = ["PROBES", "ProbeResult", "anti_cheat", "executed_image_files", "probe_rejections"]

Prior = Mapping[StageName, StageResult]

AUDIT = "autoenvscaling.tools.gate.audit:OracleAuditAgent"
TAMPER = "autoenvscaling.tools.gate.probes:TamperAgent"
CHEAT = "autoenvscaling.tools.gate.cheat_agent:CheatAuditAgent"
#: Every probe, in the order their rejections are reported.
PROBES = (
    "leak",
    "forge",
    "stub",
    "shadow",
    "status",
    "tamperer",
    "interpreters",
    "near_miss",
    "cheat_agent",
)
EXPLOIT_MODES = ("forge", "stub", "shadow", "status", "tamperer", "interpreters")
ISOLATION_MODES = ("tamperer", "interpreters")
#: Why an isolation probe did not run on a task with a shared verifier.
SHARED_VERIFIER = "the verifier shares the agent's container"


class ProbeResult(BaseModel):
    """One probe's sub-result inside the `anti_cheat` stage result."""

    probe: str
    passed: bool
    skipped: bool = False
    reward: float | None = None
    reason: str
    details: dict[str, Any] = Field(default_factory=dict)
    excerpt: str = ""


def _reward(outcome: TrialOutcome) -> float:
    return outcome.reward if outcome.reward is not None else 0.0


def _trial_info(outcome: TrialOutcome) -> dict[str, Any]:
    return {
        "reward": outcome.reward,
        "error": outcome.error,
        "trial_dir": outcome.trial_dir,
        "duration_sec": round(outcome.duration_sec, 3),
    }


# --------------------------------------------------------------------------- judging each probe


def _judge_leak(audit: TrialOutcome) -> ProbeResult:
    meta = audit.agent_metadata
    leaks = meta.get("leaks") or []
    details = {
        k: meta.get(k)
        for k in (
            "files_scanned",
            "files_hashed",
            "normalised_candidates",
            "archives_searched",
            "git_repos",
            "notes",
        )
    }
    details["leaks"] = leaks[:20]
    if not leaks:
        return ProbeResult(
            probe="leak",
            passed=True,
            reason=f"no answer readable at the start ({meta.get('files_scanned', 0)} files, "
            f"{meta.get('normalised_candidates', 0)} normalised candidates, "
            f"{meta.get('archives_searched', 0)} archives, {len(meta.get('git_repos') or [])} "
            "git repositories, the instruction)",
            details=details,
        )
    first = leaks[0]
    if first["kind"] == "task_file":
        what = f"a copy of {first['same_as']}"
    else:
        how = "the same bytes" if first["match"] == "exact" else "the same content once case, "
        how += (
            "" if first["match"] == "exact" else "whitespace, separators and line order are ignored"
        )
        what = f"an expected output: the oracle writes {first['same_as']} with {how}"
    more = f" (+{len(leaks) - 1} more)" if len(leaks) > 1 else ""
    if first["location"] == "instruction.md":
        advice = "Do not print the expected output in instruction.md; describe its format"
        where = "the instruction spells out the answer,"
    else:
        advice = (
            "Do not leave expected outputs, tests or solutions in the image (Dockerfile "
            "COPY/RUN, backups, archives, git history); compute them in tests/ at verification time"
        )
        where = f"{first['location']} holds"
    return ProbeResult(
        probe="leak",
        passed=False,
        reason=f"the answer is readable before the work is done: {where} {what}{more}. {advice}",
        details=details,
        excerpt="\n".join(f"{x['location']} == {x['same_as']} ({x['match']})" for x in leaks[:20]),
    )


def _judge_near_miss(audit: TrialOutcome, threshold: float) -> ProbeResult:
    report = audit.agent_metadata.get("near_miss") or {}
    if report.get("skipped"):
        return ProbeResult(
            probe="near_miss", passed=True, skipped=True, reason=report["skipped"], details=report
        )
    # Accepted: it passes, and the tests took nothing off for it. (A partial-credit verifier that
    # scores a dropped record 0.8 instead of 1.0 noticed it; one that still gives 1.0 did not.)
    control = report.get("control_reward") or 1.0
    accepted = [
        v
        for v in report.get("variants", [])
        if v["reward"] is not None and v["reward"] >= threshold and v["reward"] >= control
    ]
    tried = len(report.get("variants", []))
    if not accepted:
        return ProbeResult(
            probe="near_miss",
            passed=True,
            reason=f"all {tried} wrong answers derived from the oracle's outputs scored below "
            f"{threshold:g} or below the right answer's {control:g}",
            details=report,
        )
    first = accepted[0]
    kinds = ", ".join(v["kind"] for v in accepted)
    return ProbeResult(
        probe="near_miss",
        passed=False,
        reward=first["reward"],
        reason=f"the verifier accepts wrong output: {first['description']} scored "
        f"{first['reward']:g}, as much as the right answer ({len(accepted)} of {tried} near misses "
        f"accepted: {kinds}). The tests must check the values the instruction asks for, not "
        "only that the outputs exist or parse",
        details=report,
        excerpt=first.get("output", ""),
    )


_EXPLOIT_REASONS = {
    "forge": "an agent that only wrote 1 into /logs/verifier/reward.txt and reward.json scored "
    "{r:g} >= {t:g}. tests/test.sh must always write the reward itself (overwrite it, never keep "
    "or append to an existing file)",
    "stub": "the verifier runs {what} from the agent's image, which the agent can rewrite: with "
    "it replaced by an always-pass stub and no work done, the attempt scored {r:g} >= {t:g}. Put "
    "the checks in tests/ (uploaded only after the agent has finished) and judge the outputs there",
    "shadow": "the test runner imports modules from a folder the agent can write ({what}): "
    "modules dropped there that just exit 0 scored {r:g} >= {t:g}. Start Python checkers as "
    "`python3 /tests/check.py` (not -m/-c/stdin from the workdir) or cd to /tests first",
    "status": "the verifier trusts status files the agent writes: writing only {what} scored "
    "{r:g} >= {t:g}. Check the work itself, not a file that claims it was done",
    "tamperer": "a process the agent left running scored {r:g} >= {t:g} by tampering with "
    "/tests, the outputs or the reward while the verifier ran{alive}",
    "interpreters": "always-pass python3/pytest wrappers planted in /usr/local/bin made the "
    "verifier score {r:g} >= {t:g}: the verifier trusts interpreters from the agent's image",
}


def _what(mode: str, outcome: TrialOutcome) -> str:
    done = (outcome.agent_metadata.get("tampered") or {}).get(mode) or []
    return ", ".join(done[:6]) or "nothing"


def _judge_exploit(mode: str, outcome: TrialOutcome, threshold: float) -> ProbeResult:
    reward = _reward(outcome)
    details = {**_trial_info(outcome), "tampered": _what(mode, outcome)}
    alive = None
    if mode == "tamperer" and outcome.trial_dir:
        alive = (Path(outcome.trial_dir) / "verifier" / ".aes-tamperer-alive").exists()
        details["alive_during_verification"] = alive
    if reward < threshold:
        return ProbeResult(
            probe=mode,
            passed=True,
            reward=reward,
            reason=f"{mode} probe scored {reward:g} < {threshold:g}",
            details=details,
        )
    reason = _EXPLOIT_REASONS[mode].format(
        r=reward,
        t=threshold,
        what=_what(mode, outcome),
        alive=" (it was still alive during verification)" if alive else "",
    )
    return ProbeResult(
        probe=mode,
        passed=False,
        reward=reward,
        reason=reason,
        details=details,
        excerpt=failure_excerpt(outcome),
    )


def _judge_cheat(cheat: TrialOutcome, audit: TrialOutcome, config: GateConfig) -> ProbeResult:
    threshold = config.nop_threshold
    meta = cheat.agent_metadata
    reward = _reward(cheat)
    details = {**_trial_info(cheat), "written": list(meta.get("written") or {})[:20]}
    if reward < threshold:
        return ProbeResult(
            probe="cheat_agent",
            passed=True,
            reward=reward,
            reason=f"the cheat agent scored {reward:g} < {threshold:g}",
            details=details,
        )
    expected = audit.agent_metadata.get("output_fingerprints") or {}
    did_task, differences = judge(meta.get("written") or {}, expected)
    details["differences"] = differences[:10]
    if did_task:
        return ProbeResult(
            probe="cheat_agent",
            passed=True,
            reward=reward,
            reason=f"the cheat agent scored {reward:g} but its outputs equal the oracle's: it "
            "did the task",
            details=details,
        )
    if not expected:
        return ProbeResult(
            probe="cheat_agent",
            passed=True,
            reward=reward,
            reason=f"the cheat agent scored {reward:g}; no data output of the oracle to compare "
            "with, so whether it did the task is not judged",
            details=details,
        )
    hack = summary(meta.get("written") or {}, meta.get("deleted") or [])
    return ProbeResult(
        probe="cheat_agent",
        passed=False,
        reward=reward,
        reason=f"a cheat agent told to get the reward without doing the task scored {reward:g} "
        f">= {threshold:g} with outputs unlike the oracle's ({'; '.join(differences[:3])}). "
        f"What it did: {hack}. Make the tests check what the instruction asks for",
        details=details,
        excerpt=failure_excerpt(cheat),
    )


# --------------------------------------------------------------------------- the stage


async def anti_cheat(task: Path, config: GateConfig, prior: Prior) -> StageResult:
    loaded = load_task(task)  # lint admitted it; a format error here is a bug worth raising
    workdir = loaded.config.environment.workdir or "/app"
    target = plan(task, loaded.instruction, workdir)
    threshold = config.nop_threshold
    exploit_kwargs = target.model_dump()
    verifier = verifier_mode(task)
    not_run = {
        "stub": None if target.stub_paths else "nothing for the stub probe to aim at",
        "shadow": None if target.shadow_modules else "nothing for the shadow probe to aim at",
        "status": None if target.status_files else "nothing for the status probe to aim at",
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
    split = len(together) > 1 and _reward(outcomes["exploits"]) >= threshold
    if split:
        alone = await asyncio.gather(*(tamper(f"exploit-{m}", m) for m in together))
        outcomes.update({f"exploit:{m}": o for m, o in zip(together, alone, strict=True)})

    trial_details = {name: _trial_info(o) for name, o in outcomes.items()}
    for name, outcome in outcomes.items():
        fault = failure(outcome)
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

    results: dict[str, ProbeResult] = {"leak": _judge_leak(audit)}
    if config.near_miss:
        results["near_miss"] = _judge_near_miss(audit, threshold)
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
        result = _judge_exploit(mode, own, threshold)
        if mode in together and not split:
            result.details["combined_with"] = together
        results[mode] = result
    if "cheat_agent" in outcomes:
        results["cheat_agent"] = _judge_cheat(outcomes["cheat_agent"], audit, config)
    else:
        results["cheat_agent"] = ProbeResult(
            probe="cheat_agent",
            passed=True,
            skipped=True,
            reason="the cheat agent did not run: no cheat model configured "
            "(GateConfig.cheat_model or cheat_agent)",
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
    if config.cheat_model:
        return solver_cheat_kwargs(
            config.cheat_model, config.cheat_base_url, config.cheat_max_turns
        )
    return None


def probe_rejections(verdicts: Iterable[Verdict]) -> Counter[str]:
    """How often each probe rejected a task over `verdicts` (every probe that rejected counts,
    not only the one the reason names), in `PROBES` order: which hacks the proposer falls for."""
    counts: Counter[str] = Counter()
    for verdict in verdicts:
        for stage in verdict.stages:
            if stage.stage == "anti_cheat":
                counts.update(stage.details.get("rejected_by") or [])
    return Counter({p: counts[p] for p in PROBES if counts[p]})
