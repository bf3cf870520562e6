"""Seed tasks' trials under gVisor (runsc): the oracle earns 1.0 and the nop agent 0.0, as under
runc (tests/test_gate_seed.py holds the pool on the default runtime). The whole pool through the
gate under runsc takes ~35 min on 2 loaded cores (benchmarks/RESULTS.md), too long for the slow
tier: these are the tasks that broke under an older runsc or our copies into it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoenvscaling.tools.sandbox import runtimes
from autoenvscaling.tools.settings import get_settings
from autoenvscaling.tools.trials.trial import run_trial

from .test_sandbox_runtimes import runsc_or_skip

SEED = Path(__file__).resolve().parents[1] / "tasks" / "seed"
#: `ls` / `stat` in their scripts (bookworm's runsc 0.0~20221219 broke both: runtimes.py), a
#: workdir below the folder the separate verifier empties (python-ledger-bugs: exec_archive.py
#: runs from /), and the first task that ran under runsc. Not tmux-editor-settings: runsc
#: 0.0~20240729 keeps memory for every tmux call (runtimes.py; tests/test_sandbox_runtimes.py
#: holds it). Nor the tasks whose tests time whole processes against a reference (blur-separable-c
#: asks 3x and measured 2.92x under runsc on a loaded machine; histogram-edges-c): gVisor's
#: process start (~26 ms against ~1 ms) narrows the speed-up they can see.
TASKS = (
    "access-log-report",
    "archive-old-large-files",
    "fix-site-permissions",
    "logrotate-script",
    "python-ledger-bugs",
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        not os.access(runtimes.RUNSC, os.X_OK),
        reason=f"{runtimes.RUNSC} is not installed (`make system` installs runsc)",
    ),
]


@pytest.mark.parametrize("task", TASKS)
async def test_seed_task_under_gvisor_oracle_passes_nop_fails(engine_ready, monkeypatch, task):
    runsc_or_skip()
    monkeypatch.setenv("AUTOENVSCALING_SANDBOX_RUNTIME", "runsc")
    get_settings.cache_clear()
    try:
        oracle = await run_trial(SEED / task, agent="oracle")
        nop = await run_trial(SEED / task, agent="nop")
    finally:
        get_settings.cache_clear()
    assert oracle.reward == 1.0, (oracle.error, oracle.verifier_output[-800:])
    assert nop.reward == 0.0, (nop.error, nop.verifier_output[-800:])
