"""Issue #29.4: the coordinator's concurrency benchmark completes every episode, with its real
tool results recorded (benchmarks/bench_concurrency.py, fake remote sandbox; no timing asserts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autoenvscaling.tools.rollouts.store import RolloutStore

REPO = Path(__file__).resolve().parents[1]
EPISODES = 6


@pytest.mark.timeout(300)
def test_four_episodes_in_flight_each_recorded_with_its_tool_results(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_concurrency.py"),
            "--k",
            "4",
            "--episodes",
            str(EPISODES),
            "--calls",
            "5",
            "--exec-ms",
            "5",
            "--start-ms",
            "5",
            "--transfer-ms",
            "5",
            "--timeout-per-k",
            "200",
            "--json",
            str(out),
            "--keep",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
        env={**os.environ, "HARBOR_TELEMETRY": "0"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    [result] = json.loads(out.read_text())["results"]
    assert "error" not in result, result.get("error")
    assert not result["timed_out"] and result["crash_count"] == 0, result
    assert (result["recorded"], result["solved"], result["errors"]) == (EPISODES, EPISODES, 0)
    assert result["outcomes"] == {"solved": EPISODES}
    assert result["tool_calls"] == 5 * EPISODES
    # Harbor's trial and the solver sent only commands the fake understands, and every fake
    # sandbox was closed.
    assert result["fake"]["unknown_count"] == 0, result["fake"]["unknown_commands"]
    assert result["fake"]["open_sandboxes"] == 0
    assert result["fake"]["calls"]["start"] == EPISODES
    assert "| 4 | 6 | 6 / 6 | 0 |" in done.stdout  # the Markdown table's row

    # The store holds each episode's own tool results, in order, as the model read them.
    with RolloutStore(tmp_path / "k4" / "run" / "rollouts.db") as store:
        attempts = [
            a
            for a in store.list_attempts(run_id="bench-concurrency", role="solver", limit=100)
            if a.metadata.get("purpose") == "bench"
        ]
        assert len(attempts) == EPISODES
        for attempt in attempts:
            word = f"answer-{int(attempt.task_id.rsplit('-', 1)[1]):03d}"
            steps = [s for s in store.trajectory(attempt.id).steps if s.tool_name]
            commands = [(s.tool_args or {}).get("command") for s in steps]
            assert commands == [
                f"echo {word} > /app/answer.txt",
                "cat /app/answer.txt",
                "ls -la /app",
                "seq 1 400",
                "pwd",
            ]
            assert word in (steps[1].tool_output or "")
            assert "answer.txt" in (steps[2].tool_output or "")
            assert "\n400\n" in (steps[3].tool_output or "") and steps[3].exit_code == 0
            assert attempt.reward == 1.0 and attempt.outcome == "solved"
            # Harbor's verifier output, downloaded from the fake, names the word it found.
            assert word in attempt.metadata.get("verifier_output", "")
