"""Real Harbor trials (the `harbor` library's Trial on our container environment): the reward
comes from a separate verifier — a fresh container of the task's image holding only the agent's
`/app` — by Harbor 0.25's own `environment_mode = "separate"` and `artifacts` mechanism."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from autoenvscaling.tools.trials.trial import run_trial
from tests.conftest import SEED_DIR
from tests.security.conftest import BACKEND, describe, write_task

pytestmark = [pytest.mark.timeout(600)]

SOLVE = """\
    #!/bin/bash
    # The work (in /app), plus traces outside it that only the agent's own container has.
    echo $(( $(cat /app/input.txt) * 2 )) > /app/output.txt
    touch /tmp/agent-was-here
    setsid sleep 600 </dev/null >/dev/null 2>&1 &
    """
TEST_SH = """\
    #!/bin/bash
    # 1.0 only when the work is here and nothing else of the agent's container is.
    mkdir -p /logs/verifier
    python3 - <<'EOF'
    import os
    from pathlib import Path

    def agent_process_alive():
        for pid in os.listdir("/proc"):
            try:
                if b"sleep\\x00600" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return True
            except OSError:
                pass
        return False

    checks = {
        "work copied in": Path("/app/output.txt").exists()
        and Path("/app/output.txt").read_text().strip() == "42",
        "input kept": Path("/app/input.txt").read_text().strip() == "21",
        "fresh container": not Path("/tmp/agent-was-here").exists(),
        "no agent process": not agent_process_alive(),
    }
    for name, ok in checks.items():
        print("PASS" if ok else "FAIL", name)
    Path("/logs/verifier/reward.txt").write_text("1.0\\n" if all(checks.values()) else "0.0\\n")
    EOF
    """
DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\nRUN echo 21 > /app/input.txt\n"


def _task(root: Path, mode: str) -> Path:
    return write_task(
        root, f"double-{mode}", solve=SOLVE, test_sh=TEST_SH, mode=mode, dockerfile=DOCKERFILE
    )


async def test_reward_comes_from_a_fresh_container_with_the_work_copied_in(engine_ready, tmp_path):
    separate, shared = _task(tmp_path, "separate"), _task(tmp_path, "shared")
    seed = SEED_DIR / "fix-site-permissions"
    runs = {
        "separate/oracle": (separate, "oracle"),
        "separate/nop": (separate, "nop"),
        "shared/oracle": (shared, "oracle"),
        "seed/oracle": (seed, "oracle"),
        "seed/nop": (seed, "nop"),
    }
    outcomes = dict(
        zip(
            runs,
            await asyncio.gather(
                *(
                    run_trial(task, agent=agent, backend=BACKEND, trials_dir=tmp_path / key)
                    for key, (task, agent) in runs.items()
                )
            ),
            strict=True,
        )
    )
    oracle = outcomes["separate/oracle"]
    assert (oracle.reward, oracle.error) == (1.0, None), describe(oracle)
    assert "PASS fresh container" in oracle.verifier_output
    result = json.loads((Path(oracle.trial_dir) / "result.json").read_text())
    assert result["verifier_environment_mode"] == "separate"
    # Harbor's own artifact collection carried /app across (its manifest says so).
    manifest = json.loads((Path(oracle.trial_dir) / "artifacts" / "manifest.json").read_text())
    assert {"source": "/app", "status": "ok"}.items() <= next(
        e for e in manifest if e["source"] == "/app"
    ).items()

    nop = outcomes["separate/nop"]
    assert (nop.reward, nop.error) == (0.0, None), describe(nop)
    # The same task on a shared verifier meets the agent's container (its marker file): 0.
    shared_oracle = outcomes["shared/oracle"]
    assert shared_oracle.reward == 0.0, describe(shared_oracle)
    assert "FAIL fresh container" in shared_oracle.verifier_output
    assert "PASS no agent process" in shared_oracle.verifier_output  # killed before /tests
    # A seed task on the separate verifier: oracle 1.0, nop 0.0.
    assert (outcomes["seed/oracle"].reward, outcomes["seed/oracle"].error) == (1.0, None)
    assert (outcomes["seed/nop"].reward, outcomes["seed/nop"].error) == (0.0, None)
