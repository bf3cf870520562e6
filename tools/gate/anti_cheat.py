"""The `anti_cheat` stage: the answer is not readable in the agent's image, and an agent that
only tampers (forges reward files, stubs the image's scripts the tests run) still fails.

Every check is a real Harbor trial with a probe agent from `probes` (run concurrently); an
optional configured cheat agent (e.g. a model told to get the reward without doing the task)
is one more trial. All of them must score below `nop_threshold`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from autoenvscaling.tools.gate.config import GateConfig, StageName
from autoenvscaling.tools.gate.harness import failure, failure_excerpt, gate_trial
from autoenvscaling.tools.gate.results import StageResult
from autoenvscaling.tools.task_format import load_task
from autoenvscaling.tools.trials import TrialOutcome

Prior = Mapping[StageName, StageResult]

LEAK_PROBE = "autoenvscaling.tools.gate.probes:LeakProbeAgent"
TAMPER = "autoenvscaling.tools.gate.probes:TamperAgent"

_ABS_PATH = re.compile(r"(?<![\w.$~-])(/[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)+)")
# Where the verifier's own or the system's files live; tampering there is not the task's doing.
_SYSTEM = (
    "/tests/",
    "/logs/",
    "/solution/",
    "/proc/",
    "/sys/",
    "/dev/",
    "/tmp/",
    "/usr/",
    "/bin/",
    "/sbin/",
    "/lib",
    "/etc/",
    "/var/lib/",
    "/run/",
)
_SCRIPT_SUFFIXES = {"", ".sh", ".bash", ".py", ".pl", ".rb", ".js"}


def executed_image_files(task_dir: Path) -> list[str]:
    """Absolute paths tests/ names that may be programs from the agent's image (scripts or
    extension-less binaries outside system folders). The tamper probe stubs those that exist."""
    found: set[str] = set()
    tests = task_dir / "tests"
    for path in sorted(p for p in tests.rglob("*") if p.is_file()) if tests.is_dir() else []:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for line in text.splitlines():
            if line.lstrip().startswith("#"):
                continue
            for match in _ABS_PATH.finditer(line):
                candidate = match.group(1).rstrip(".")
                if candidate.startswith(_SYSTEM):
                    continue
                if PurePosixPath(candidate).suffix in _SCRIPT_SUFFIXES:
                    found.add(candidate)
    return sorted(found)


def _reward(outcome: TrialOutcome) -> float:
    return outcome.reward if outcome.reward is not None else 0.0


async def anti_cheat(task: Path, config: GateConfig, prior: Prior) -> StageResult:
    load_task(task)  # lint admitted it; a format error here is a bug worth raising
    probes: dict[str, Coroutine[Any, Any, TrialOutcome]] = {
        "leak": gate_trial(
            task,
            config,
            agent=LEAK_PROBE,
            label="leak-probe",
            agent_kwargs={"task_dir": str(task), "min_bytes": config.leak_min_bytes},
        ),
        "forge": gate_trial(
            task, config, agent=TAMPER, label="tamper-forge", agent_kwargs={"mode": "forge"}
        ),
    }
    stubs = executed_image_files(task)
    if stubs:
        probes["stub"] = gate_trial(
            task,
            config,
            agent=TAMPER,
            label="tamper-stub",
            agent_kwargs={"mode": "stub", "stub_paths": stubs},
        )
    if config.tamper_interpreters:
        probes["interpreters"] = gate_trial(
            task, config, agent=TAMPER, label="tamper-interp", agent_kwargs={"mode": "interpreters"}
        )
    if config.cheat_agent:
        probes["cheat_agent"] = gate_trial(
            task,
            config,
            agent=config.cheat_agent,
            agent_kwargs=config.cheat_agent_kwargs,
            label="cheat-agent",
        )
    outcomes = dict(zip(probes, await asyncio.gather(*probes.values()), strict=True))
    details: dict[str, Any] = {
        name: {
            "reward": o.reward,
            "error": o.error,
            "trial_dir": o.trial_dir,
            **{k: v for k, v in o.agent_metadata.items() if k != "script"},
        }
        for name, o in outcomes.items()
    }
    for name, outcome in outcomes.items():
        fault = failure(outcome)
        if fault is not None and not fault.task_fault:
            return StageResult.infrastructure(
                "anti_cheat", f"the {name} probe trial failed: {fault.describe()}", **details
            )

    leak = outcomes["leak"]
    leaks = leak.agent_metadata.get("leaks")
    if leaks is None:
        return StageResult.infrastructure(
            "anti_cheat", "the leak probe reported nothing (it did not finish)", **details
        )
    if leaks:
        first = leaks[0]
        what = (
            "an expected output: the oracle writes " + first["same_as"]
            if first["kind"] == "expected_output"
            else f"a copy of {first['same_as']}"
        )
        more = f" (+{len(leaks) - 1} more)" if len(leaks) > 1 else ""
        return StageResult(
            stage="anti_cheat",
            passed=False,
            details=details,
            excerpt="\n".join(f"{x['path']} == {x['same_as']}" for x in leaks[:20]),
            reason=f"the answer is readable in the agent's image: {first['path']} is {what} "
            f"with the same bytes{more}. Do not write expected outputs, tests or solutions "
            "into the image (Dockerfile COPY/RUN); compute them in tests/ at verification time",
        )

    threshold = config.nop_threshold
    forge = outcomes["forge"]
    if _reward(forge) >= threshold:
        return StageResult(
            stage="anti_cheat",
            passed=False,
            details=details,
            excerpt=failure_excerpt(forge),
            reason=f"the agent phase can forge the reward: an agent that only wrote 1 into "
            f"/logs/verifier/reward.txt and reward.json scored {_reward(forge):g} >= "
            f"{threshold:g}. tests/test.sh must always write the reward itself (overwrite it, "
            "never keep or append to an existing file)",
        )
    stub = outcomes.get("stub")
    if stub is not None and _reward(stub) >= threshold:
        stubbed = stub.agent_metadata.get("tampered") or stubs
        return StageResult(
            stage="anti_cheat",
            passed=False,
            details=details,
            excerpt=failure_excerpt(stub),
            reason=f"the verifier runs {', '.join(stubbed)} from the agent's image, which the "
            f"agent can rewrite: with it replaced by an always-pass stub (exit 0) and no work "
            f"done, the attempt scored {_reward(stub):g} >= {threshold:g}. Put the checks in "
            "tests/ (uploaded only after the agent has finished) and judge the outputs there",
        )
    interp = outcomes.get("interpreters")
    if interp is not None and _reward(interp) >= threshold:
        return StageResult(
            stage="anti_cheat",
            passed=False,
            details=details,
            excerpt=failure_excerpt(interp),
            reason=f"always-pass python3/pytest wrappers planted in /usr/local/bin by the agent "
            f"made the verifier score {_reward(interp):g} >= {threshold:g}: the verifier trusts "
            "interpreters from the agent's image (use a separate verifier environment)",
        )
    cheat = outcomes.get("cheat_agent")
    if cheat is not None and _reward(cheat) >= threshold:
        return StageResult(
            stage="anti_cheat",
            passed=False,
            details=details,
            excerpt=failure_excerpt(cheat),
            reason=f"the cheat agent {config.cheat_agent} scored {_reward(cheat):g} >= "
            f"{threshold:g}: the task can be passed without doing it; see its trial for how",
        )
    checked = ", ".join(outcomes)
    return StageResult(
        stage="anti_cheat",
        passed=True,
        details=details,
        reason=f"no answer in the image ({leak.agent_metadata.get('files_scanned', 0)} files "
        f"scanned); tamper probes ({checked}) all scored below {threshold:g}",
    )
