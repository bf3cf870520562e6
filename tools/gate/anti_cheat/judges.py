"""How the `anti_cheat` stage judges each probe's trial: a leak, a near miss, an exploit, the cheat
agent. Each judge turns one Harbor trial's outcome into a `ProbeResult` whose reason names the
weakness found and what to change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ...trials.trial import TrialOutcome
from ..config import GateConfig
from ..harness import failure_excerpt
from .cheat_agent import judge, summary


class ProbeResult(BaseModel):
    """One probe's sub-result inside the `anti_cheat` stage result."""

    probe: str
    passed: bool
    skipped: bool = False
    reward: float | None = None
    reason: str
    details: dict[str, Any] = Field(default_factory=dict)
    excerpt: str = ""


def probe_reward(outcome: TrialOutcome) -> float:
    return outcome.reward if outcome.reward is not None else 0.0


def trial_info(outcome: TrialOutcome) -> dict[str, Any]:
    return {
        "reward": outcome.reward,
        "error": outcome.error,
        "trial_dir": outcome.trial_dir,
        "duration_sec": round(outcome.duration_sec, 3),
    }


# --------------------------------------------------------------------------- judging each probe


def judge_leak(audit: TrialOutcome) -> ProbeResult:
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
            "git_search",  # what reading the git history cost: stores, objects, bytes
            "phase_seconds",
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


def judge_near_miss(audit: TrialOutcome, threshold: float) -> ProbeResult:
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
    "program": "the verifier runs the agent's program ({what}) as a user that can write "
    "/logs/verifier: a version that only writes the reward (and leaves a writer behind) scored "
    "{r:g} >= {t:g}. Run the agent's programs as an unprivileged user (e.g. `setpriv "
    "--reuid=nobody --regid=nogroup --clear-groups`, or Python's subprocess user=/group=) with "
    "/logs/verifier not writable by it, end its processes before writing the reward, and write "
    "the reward file last",
    "git": "the verifier runs git in the agent's repository ({what}), whose own config names "
    "programs git runs (core.fsmonitor, clean/smudge filters, hooks): ones that write the reward "
    "scored {r:g} >= {t:g}. Before running git there, replace .git/config with one of the "
    "verifier's own and remove .git/hooks and .git/info/attributes (or run git as an "
    "unprivileged user that cannot write /logs/verifier)",
    "customize": "the verifier's python3 imports sitecustomize/usercustomize from a folder of "
    "the agent's ({what}): ones that write the reward scored {r:g} >= {t:g}. Start checkers "
    "with `python3 -I /tests/check.py` (isolated: no PYTHONPATH, no user site) and never put the "
    "agent's folders on the verifier's PYTHONPATH",
}


def _what(mode: str, outcome: TrialOutcome) -> str:
    done = (outcome.agent_metadata.get("tampered") or {}).get(mode) or []
    return ", ".join(done[:6]) or "nothing"


def judge_exploit(mode: str, outcome: TrialOutcome, threshold: float) -> ProbeResult:
    reward = probe_reward(outcome)
    details = {**trial_info(outcome), "tampered": _what(mode, outcome)}
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


def judge_cheat(cheat: TrialOutcome, audit: TrialOutcome, config: GateConfig) -> ProbeResult:
    threshold = config.nop_threshold
    meta = cheat.agent_metadata
    reward = probe_reward(cheat)
    details = {**trial_info(cheat), "written": list(meta.get("written") or {})[:20]}
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
