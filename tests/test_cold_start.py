"""The cold start end to end on a scripted model: both roles' episodes replayed through the real
tools (podman sandboxes, MCP servers, the gate), one dataset in the export's row format with its
card, SFT on it (TRL, a tiny model), and the checkpoint served to both roles in round 1.

Only the model's replies are scripted (the replays, then the stand-in server's answers in round
1); what the tools returned is checked in the dataset the SFT reads.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoenvscaling.graphs.cold_start.start import (
    CARD,
    DATASET,
    ColdStartSettings,
    adopt_cold_start,
    build_dataset,
    cold_start_checkpoint,
)
from autoenvscaling.graphs.config import FlywheelContext
from autoenvscaling.graphs.flywheel.builder import build_flywheel
from autoenvscaling.graphs.models import Policy
from autoenvscaling.tools.export.rollouts import export_rollouts
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.training.serving.vllm_server import VLLMPolicyServer
from autoenvscaling.training.sft.data import read_jsonl

from .conftest import REPO
from .test_training_vllm_contract import FakeVLLM, Served

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

TASKS = ("count-lines", "json-field")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("starter")
    for name in TASKS:
        shutil.copytree(REPO / "tasks" / "starter" / name, root / name)
    return root


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from tests.tiny_model import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("model") / "tiny")


def _tool_results(row: dict) -> list[str]:
    return [m["content"] for m in row["messages"] if m["role"] == "tool"]


async def test_cold_start_trains_both_roles_and_serves_round_one(
    tasks: Path, tiny_model: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    # Two passes over the solver's episodes, one over the proposer's: the SFT sees that mix.
    settings = ColdStartSettings(
        steps=2, batch_size=2, max_length=16384, epochs={"solver": 2, "proposer": 1}
    )
    said: list[str] = []
    checkpoint, card = await cold_start_checkpoint(
        cache, base_model=str(tiny_model), tasks_dir=tasks, settings=settings, progress=said.append
    )

    # -- the dataset: both roles, every example verified, rows in the export's format ---------
    assert card.solver.kept == card.proposer.kept == len(TASKS), card.model_dump_json(indent=2)
    assert card.examples == {"solver": 2, "proposer": 2}
    assert "calibrate not run" in card.calibration
    rows = [json.loads(line) for line in (cache / DATASET).read_text().splitlines()]
    exported = tmp_path / "export.jsonl"
    export_rollouts(cache / "rollouts.db", exported, fmt="jsonl")
    export_keys = set(json.loads(exported.read_text().splitlines()[0]))
    assert all(export_keys <= set(row) for row in rows)
    # The proposer's rows are what the export of its attempts writes: same conversation.
    by_id = {json.loads(line)["id"]: json.loads(line) for line in exported.read_text().splitlines()}
    for row in (r for r in rows if r["role"] == "proposer"):
        assert row["messages"] == by_id[row["id"]]["messages"][: len(row["messages"])]

    # -- real tool results, as the model was shown them ---------------------------------------
    solver = next(r for r in rows if r["role"] == "solver" and r["task_id"] == "count-lines")
    assert solver["messages"][0]["role"] == "system"
    calls = [c for m in solver["messages"] for c in m.get("tool_calls", [])]
    assert [c["function"]["name"] for c in calls] == ["run"]
    assert json.loads(calls[0]["function"]["arguments"])["command"].startswith("wc -l")
    assert _tool_results(solver)[0].endswith("[exit code 0]")  # the terminal's own report
    proposer = next(r for r in rows if r["role"] == "proposer")
    names = [c["function"]["name"] for m in proposer["messages"] for c in m.get("tool_calls", [])]
    assert names == ["check", "run", "submit"]  # each file was a <file> block, not a call
    # ... the channel the system prompt it is trained on describes, beside `write_file`.
    assert "as `write_file` writes it" in proposer["messages"][0]["content"]
    blocks = [m for m in proposer["messages"] if '<file path="' in (m.get("content") or "")]
    assert [m["role"] for m in blocks].count("assistant") == 5
    # The episode loop's real answer to each block: the file is in the folder.
    written = [m["content"] for m in proposer["messages"] if "now in the task folder" in str(m)]
    assert len(written) == 5
    results = [json.loads(t) for t in _tool_results(proposer)]
    assert results[0]["passed"] is True and results[0]["stages"][0]["stage"] == "lint"
    assert results[1]["output"] == "syntax ok\n"  # the workspace's bash read the scripts
    assert proposer["messages"][-1]["role"] == "assistant"  # ends on its own submit call
    whole = _tool_results(by_id[proposer["id"]])  # the attempt as exported: submit's receipt too
    assert json.loads(whole[-1])["submitted"] is True
    # The brief the model read is round 1's, over a pool without the task it writes.
    brief = proposer["messages"][1]["content"]
    assert "round 1" in brief.lower() or "Round 1" in brief
    with RolloutStore(cache / "rollouts.db") as store:
        admitted = [t.attempt for t in store.iter_trajectories(role="proposer") if t.attempt.reward]
    assert {a.metadata["stage"] for a in admitted} == {None}  # admitted: no stage failed
    # SFT reads the file as it is.
    assert {e.role for e in read_jsonl(cache / DATASET)} == {"solver", "proposer"}

    # -- SFT ran and moved the weights; the card says what it cost ----------------------------
    assert card.sft["param_change_l2"] > 0
    assert card.sft["by_role"] == {"solver": 4, "proposer": 2}
    assert {"solver_replays", "proposer_replays", "sft"} <= set(card.seconds)
    # Where the time went: every step's tokens named by role (a row's length says whose), the
    # loss on the model's own turns only, and CPU seconds apart from the wall clock.
    assert card.sft["steps"] == 2 and card.sft["tokens_per_second"] > 0
    tokens, loss_tokens = card.sft["tokens_by_role"], card.sft["loss_tokens_by_role"]
    assert tokens and set(tokens) <= {"solver", "proposer"}, tokens
    assert all(0 < loss_tokens[role] < tokens[role] for role in tokens)
    assert set(card.sft["step_seconds_by_role"]) == set(tokens)
    assert {"solver_replays", "proposer_replays", "sft"} <= set(card.cpu_seconds)
    assert card.cpu_seconds["sft"] > 0
    # Built once: a second call reuses it without replaying anything.
    again, _ = await cold_start_checkpoint(
        cache, base_model=str(tiny_model), tasks_dir=tasks, settings=settings, progress=said.append
    )
    assert again.id == checkpoint.id and "built before" in said[-1]

    # -- round 1: both roles are served the cold-start checkpoint -----------------------------
    fake = FakeVLLM(runtime_lora=True, dev_mode=False)
    fake.base = str(tiny_model)
    with Served(fake) as served:
        server = VLLMPolicyServer(served.base_url, str(tiny_model))
        run_dir = tmp_path / "run"
        current = Policy(model=f"openai:{tiny_model}", base_url=served.base_url)
        policy = await adopt_cold_start(checkpoint, run_dir / "checkpoints", server, current)
        ctx = FlywheelContext(
            run_dir=str(run_dir),
            seed_dir=str(tasks),
            policy_server="vllm",
            policy_model=policy.model,
            policy_base_url=policy.base_url,
            policy_checkpoint_id=checkpoint.id,
            base_model=str(tiny_model),
            cold_start=True,
            proposals=1,
            proposer_max_turns=1,
            max_revisions=0,
            solver_max_turns=1,
            baseline_tasks=1,
            refresh_attempts=1,
            refresh_limit=1,
            calibrate=False,
            train=False,
        )
        await build_flywheel().ainvoke({"rounds": 1}, context=ctx)
        asked = {body.get("model") for body in fake.chat_requests}
    assert asked == {checkpoint.id}  # every model call of the round named the checkpoint
    with RolloutStore(run_dir / "rollouts.db") as store:
        attempts = [t.attempt for t in store.iter_trajectories()]
    roles = {a.role for a in attempts if a.policy_version == checkpoint.id}
    assert roles == {"solver", "proposer"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["policy_lineage"][0] == {
        "round": 0,
        "checkpoint": checkpoint.id,
        "adopted": "before round 1",
    }
    assert json.loads((cache / CARD).read_text())["checkpoint"] == checkpoint.id


async def test_a_task_that_cannot_be_authored_is_dropped_with_the_reason(tmp_path: Path) -> None:
    """A binary file cannot be written with `write_file`: the authoring replay says so and the
    card counts it; nothing runs for it."""
    task = tmp_path / "tasks" / "binary-input"
    shutil.copytree(REPO / "tasks" / "starter" / "count-lines", task)
    (task / "environment" / "blob.bin").write_bytes(b"\xff\xfe\x00\x01")
    card = await build_dataset(
        tmp_path / "tasks",
        tmp_path / "cache",
        base_model="unused",
        settings=ColdStartSettings(roles=("proposer",)),
    )
    assert card.proposer.attempted == 1 and card.proposer.kept == 0
    assert "blob.bin is not text" in card.proposer.dropped["binary-input"]
    assert (tmp_path / "cache" / DATASET).read_text() == ""
