"""Flaky verifiers, caught with a stated confidence.

A verifier that passes the correct output only part of the time teaches the policy noise. Full
oracle reruns are trials (a build check, a container, the solution, a verifier container); to
re-check only the verifier, `VerifierRerunAgent` runs the oracle once as Harbor's oracle does,
snapshots the work it left (the workdir), then runs the task's tests/test.sh `reruns` times in
that same container — each time on the snapshot restored, reward files cleared — and puts the
work back so Harbor's own verifier then judges it as usual. N verifier checks for the price of
one trial: no extra container start.

Every run of the tests on the oracle's work must give 1.0. After n such runs all passed, a
verifier that fails a fraction q of its runs would have been caught with probability
1 - (1 - q)^n; the verdict states the smallest q caught with 95% confidence
(`caught_flake_rate`). With the gate's defaults (the oracle trial, 2 full reruns, 8
verifier-only reruns: 11 runs) that is 24%; a 50% flake slips through once in 2048 gate runs.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from pathlib import Path
from typing import Any, override

from harbor.agents.oracle import OracleAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from harbor.models.trial.paths import TrialPaths
from harbor.utils.env import resolve_env_vars

from ..tasks.format import load_task
from ..trials.script_agent import NoWebTools

#: Import path of the agent, as `gate_trial` takes it.
RERUN_AGENT = "autoenvscaling.tools.gate.flake:VerifierRerunAgent"
_SNAPSHOT = "/tmp/.aes-flake-work.tar"
#: Workdirs whose contents are the system itself: never emptied and restored.
_NOT_RESTORABLE = {"", "/usr", "/etc", "/var", "/opt", "/root", "/home", "/tmp", "/bin", "/lib"}


def caught_flake_rate(runs: int, confidence: float = 0.95) -> float:
    """Smallest per-run failure rate that `runs` passing runs rule out with `confidence`:
    1 - (1 - confidence)^(1/runs). 1.0 when nothing ran."""
    if runs <= 0:
        return 1.0
    return 1.0 - math.exp(math.log(1.0 - confidence) / runs)


async def root_sh(env: BaseEnvironment, command: str, timeout_sec: int | None = 120) -> str:
    """`command`'s stdout, run as root in the sandbox."""
    result = await env.exec(command, user="root", timeout_sec=timeout_sec)
    return result.stdout or ""


async def read_reward_text(env: BaseEnvironment, tries: int = 3) -> str:
    """The reward file's text ('' when the tests wrote none). The read ends with a random
    marker: a short exec's output can come back empty when the machine is loaded (seen twice
    as a good verifier judged flaky: the tests printed PASS, the read found nothing), so a
    read without its marker is read again; nothing the reward file holds can forge it."""
    end = f"AES-END-{secrets.token_hex(8)}"
    for _ in range(tries):
        out = await root_sh(
            env,
            "{ cat /logs/verifier/reward.json 2>/dev/null || cat /logs/verifier/reward.txt "
            f"2>/dev/null; }}; printf '\\n%s\\n' {end}",
        )
        if end in out:
            return out.rsplit(end, 1)[0].strip()
    return ""


async def run_tests_here(
    env: BaseEnvironment, verifier: Any, timeout_sec: float, tail: int
) -> tuple[float | None, str]:
    """Run tests/test.sh in this sandbox as Harbor's verifier would (the caller clears the reward
    files first): the reward it wrote (None: none, or not a number) and its output's last
    `tail` characters."""
    result = await env.exec(
        "chmod +x /tests/test.sh 2>/dev/null; /tests/test.sh > /tmp/.aes-tests-out 2>&1; "
        f"tail -c {tail} /tmp/.aes-tests-out",
        env=resolve_env_vars(dict(verifier.env)) if verifier.env else None,
        user=verifier.user,
        timeout_sec=int(timeout_sec),
    )
    text = await read_reward_text(env)
    try:
        value = json.loads(text) if text else None
    except ValueError:
        value = None
    if isinstance(value, dict):
        value = value.get("reward")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None, result.stdout or ""
    return float(value), result.stdout or ""


class SandboxStoppedError(RuntimeError):
    """The sandbox stopped under the reruns. Only the task's own tests ran there, so it is the
    task's fault (faults.TASK_FAULTS), as a sandbox a policy stops is the policy's: calling it
    the machine's would let a task dodge its rejection by ending its own container."""


async def _still_running(env: BaseEnvironment, output: str) -> None:
    """A rerun without a reward in a sandbox that no longer runs is not a flaky verifier but a
    stopped sandbox, and the verdict says so (seen on Harbor's podman type under load: the
    container stopped between reruns, and five "no reward" runs read as flakiness)."""
    try:
        alive = await env.exec("true", user="root", timeout_sec=60)
        code, why = alive.return_code, alive.stderr or alive.stdout or output or ""
    except Exception as exc:  # noqa: BLE001 - our engines raise once the container is gone
        code, why = -1, str(exc)
    if code != 0:
        why = why.strip()[-300:]
        raise SandboxStoppedError(f"the sandbox stopped during the verifier-only reruns: {why}")


class VerifierRerunAgent(OracleAgent, NoWebTools):
    """Harbor's oracle, then `reruns` verifier-only runs on its saved work (see module doc)."""

    def __init__(
        self,
        logs_dir: Path,
        *args: Any,
        task_dir: str,
        reruns: int = 8,
        budget_sec: float = 600.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            logs_dir, Path(task_dir), TrialPaths(Path(logs_dir).parent), *args, **kwargs
        )
        self.task_path = Path(task_dir)
        self.reruns = reruns
        # A slow verifier must not push the trial past the gate's wall cap (blamed on the
        # task): reruns stop when the next one would not fit; the bound counts those that ran.
        self.budget_sec = budget_sec

    @staticmethod
    @override
    def name() -> str:
        return "autoenvscaling-verifier-rerun"

    @override
    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        env = environment
        await super().run(instruction, env, context)  # the oracle, unchanged
        workdir = ((await env.exec("pwd")).stdout or "").strip() or "/"
        verifier = load_task(self.task_path).config.verifier
        rewards: list[float | None] = []
        outputs: list[str] = []
        if workdir.rstrip("/") in _NOT_RESTORABLE:  # restoring it would empty the system
            context.metadata = {
                **(context.metadata or {}),
                "verifier_reruns": [],
                "verifier_rerun_note": f"no verifier-only reruns: the workdir is {workdir}",
            }
            return
        await root_sh(env, f"tar -C {workdir} -cf {_SNAPSHOT} . 2>/dev/null; true")
        await env.upload_dir(self.task_path / "tests", "/tests")
        started = time.monotonic()
        longest = 0.0
        stopped = False
        try:
            for _ in range(self.reruns):
                if time.monotonic() - started + longest > self.budget_sec:
                    break
                begun = time.monotonic()
                try:
                    await root_sh(
                        env,
                        f"find {workdir} -mindepth 1 -delete 2>/dev/null; tar -C {workdir} -xf "
                        f"{_SNAPSHOT}; rm -f /logs/verifier/reward.txt /logs/verifier/reward.json",
                    )
                    reward, output = await run_tests_here(
                        env, verifier, min(verifier.timeout_sec, self.budget_sec), 600
                    )
                except Exception as exc:  # our engines raise once the container is gone
                    await _still_running(env, str(exc))
                    raise
                if reward is None:
                    await _still_running(env, output)
                rewards.append(reward)
                outputs.append(output)
                longest = max(longest, time.monotonic() - begun)
        except SandboxStoppedError:
            stopped = True
            raise
        finally:
            # Harbor's own verifier then judges the oracle's work, as in any oracle trial.
            if not stopped:
                await root_sh(
                    env,
                    f"find {workdir} -mindepth 1 -delete 2>/dev/null; tar -C {workdir} -xf "
                    f"{_SNAPSHOT}; rm -rf /tests {_SNAPSHOT} /tmp/.aes-tests-out "
                    "/logs/verifier/reward.txt /logs/verifier/reward.json",
                )
        odd = next((o for r, o in zip(rewards, outputs, strict=True) if r != 1.0), "")
        context.metadata = {
            **(context.metadata or {}),
            "verifier_reruns": rewards,
            "verifier_rerun_output": odd[-600:],
        }
