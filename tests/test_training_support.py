"""Two tiny Harbor tasks whose verifiers give partial credit, so GRPO groups see reward variance.

Shared helpers for tests/test_training_*.py (this module holds no tests).
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

TASK_TOML = textwrap.dedent("""\
    schema_version = "1.4"
    # The separate verifier, as every task the gate admits: a shared one with a root agent is
    # left out of training (its reward can be forged by design).
    artifacts = ["/app"]

    [metadata]
    difficulty = "easy"
    category = "training-test"

    [verifier]
    environment_mode = "separate"
    timeout_sec = 60

    [environment]
    network_mode = "no-network"
    memory_mb = 512
    build_timeout_sec = 300
    """)

TASKS = {
    "write-numbers": (
        "Write the numbers 1 and 2, one per line, into /app/answer.txt.",
        """\
        #!/bin/bash
        # Partial credit: half a point for each expected line of /app/answer.txt (reward.txt).
        python3 - <<'PY'
        from pathlib import Path
        p = Path("/app/answer.txt")
        lines = p.read_text().split() if p.exists() else []
        score = (("1" in lines) + ("2" in lines)) / 2
        Path("/logs/verifier/reward.txt").write_text(f"{score}\\n")
        PY
        """,
        "printf '1\\n2\\n' > /app/answer.txt",
    ),
    "hello-file": (
        "Create the file /app/hello.txt containing the word hello.",
        """\
        #!/bin/bash
        # Partial credit: 0.5 when /app/hello.txt exists, 1.0 when it holds hello (reward.json).
        python3 - <<'PY'
        import json
        from pathlib import Path
        p = Path("/app/hello.txt")
        reward = 0.0
        if p.exists():
            reward = 1.0 if p.read_text().strip() == "hello" else 0.5
        Path("/logs/verifier/reward.json").write_text(json.dumps({"reward": reward}))
        PY
        """,
        "echo hello > /app/hello.txt",
    ),
}

# Commands a warm-up teaches the tiny model per task: some right, some half right, some wrong.
WARMUP_COMMANDS = {
    "write-numbers": [
        "echo 1 >> /app/answer.txt",
        "echo 2 >> /app/answer.txt",
        "printf '1\\n2\\n' > /app/answer.txt",
        "echo 3 > /app/answer.txt",
    ],
    "hello-file": [
        "echo hello > /app/hello.txt",
        "touch /app/hello.txt",
        "echo hi > /app/hello.txt",
        "ls /app",
    ],
}


def make_tasks(root: Path) -> dict[str, Path]:
    out = {}
    for name, (instruction, test_sh, solve) in TASKS.items():
        task = root / name
        for sub in ("environment", "tests", "solution"):
            (task / sub).mkdir(parents=True, exist_ok=True)
        (task / "instruction.md").write_text(instruction + "\n")
        (task / "task.toml").write_text(TASK_TOML)
        (task / "environment" / "Dockerfile").write_text(
            "FROM debian:bookworm-slim\nWORKDIR /app\n"
        )
        (task / "tests" / "test.sh").write_text(textwrap.dedent(test_sh))
        (task / "solution" / "solve.sh").write_text(f"#!/bin/bash\n{solve}\n")
        os.chmod(task / "tests" / "test.sh", 0o755)
        os.chmod(task / "solution" / "solve.sh", 0o755)
        out[name] = task
    return out
