"""Resume rebinds live resources: the endpoint comes from the running process, and the policy the
saved graph state names is loaded again into the new server under the same name.

The fast tests use the vLLM stand-in (a real HTTP server with vLLM's routes); the long one kills a
real embedded (llama.cpp) run with SIGKILL after its adapter swap and resumes it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoenvscaling.graphs.config import FlywheelContext
from autoenvscaling.graphs.flywheel.builder import build_flywheel
from autoenvscaling.graphs.flywheel.measure import role_model
from autoenvscaling.graphs.flywheel.roles import rebind_policy
from autoenvscaling.graphs.models import Policy
from autoenvscaling.tools.run_dir import RunDir
from autoenvscaling.training.checkpoints import CheckpointRegistry
from autoenvscaling.training.policy import PolicySwapError
from autoenvscaling.training.serving.vllm_server import VLLMPolicyServer

from .conftest import REPO
from .test_training_vllm_contract import BASE, FakeVLLM, Served, _ask

pytestmark = pytest.mark.timeout(120)


def _published(run: RunDir, tmp_path: Path):
    weights = tmp_path / "adapter"
    weights.mkdir()
    (weights / "adapter_config.json").write_text("{}")
    return CheckpointRegistry(run.checkpoints).publish(weights, base_model=BASE, kind="lora")


async def test_resume_loads_the_saved_policy_into_a_new_server(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.checkpoints.mkdir(parents=True)
    ckpt = _published(run, tmp_path)
    # The first process swapped the adapter in and checkpointed the policy in graph state...
    with Served(FakeVLLM(runtime_lora=True, dev_mode=False)) as first:
        ref = await VLLMPolicyServer(first.base_url, BASE).activate(ckpt)
        saved = Policy(
            model=f"openai:{ref.model}",
            base_url=first.base_url,
            checkpoint_id=ckpt.id,
            version=ckpt.id,
        )
    # ...then died with its server. The resumed process has a new server on a new port.
    with Served(FakeVLLM(runtime_lora=True, dev_mode=False)) as second:
        ctx = FlywheelContext(
            run_dir=str(run.root),
            policy_server="vllm",
            policy_base_url=second.base_url,
            base_model=BASE,
        )
        assert ckpt.id not in await VLLMPolicyServer(second.base_url, BASE).served_models()
        assert await rebind_policy(ctx, run, saved) == ckpt.id
        assert ckpt.id in await VLLMPolicyServer(second.base_url, BASE).served_models()
        # Both roles call the live endpoint (not the dead one in state) with the saved name.
        for role in ("proposer", "solver"):
            model = role_model(ctx, saved, role)
            assert (model.model, model.base_url) == (saved.model, second.base_url)
        assert _ask(model.model_copy(update={"model": ckpt.id})) == f"weights={ckpt.path}"


async def test_resume_refuses_a_policy_no_server_can_load(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.checkpoints.mkdir(parents=True)
    ckpt = _published(run, tmp_path)
    saved = Policy(model=f"openai:{ckpt.id}", checkpoint_id=ckpt.id, version=ckpt.id)
    ctx = FlywheelContext(run_dir=str(run.root), policy_server="none")
    with pytest.raises(PolicySwapError, match="no policy server"):
        await rebind_policy(ctx, run, saved)
    # The base model needs nothing loaded.
    assert await rebind_policy(ctx, run, Policy()) is None


async def test_a_checkpoint_adopted_before_round_one_starts_the_lineage(tmp_path: Path) -> None:
    ctx = FlywheelContext(
        run_dir=str(tmp_path / "run"), seed_dir=str(tmp_path / "seed"), policy_checkpoint_id="ck-1"
    )
    (tmp_path / "seed").mkdir()
    async for update in build_flywheel().astream({"rounds": 1}, context=ctx, stream_mode="updates"):
        if "setup" in update:
            assert update["setup"]["policy"].checkpoint_id == "ck-1"
            break
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["policy_lineage"] == [
        {"round": 0, "checkpoint": "ck-1", "adopted": "before round 1"}
    ]


# -- the long one: kill -9 of a default (embedded) run after its swap, then --resume ------------

DRIVER = r"""
import asyncio, json, sys
from pathlib import Path
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from autoenvscaling.graphs import run_policy
from autoenvscaling.graphs.flywheel import FlywheelContext, build_flywheel
from autoenvscaling.graphs.policy_servers import PolicyServers
from autoenvscaling.tools.run_dir import RunDir

args = json.loads(sys.argv[1])

async def main():
    async with PolicyServers() as servers:
        values = await run_policy.embedded_defaults(
            servers, model_path=Path(args["gguf"]), base_model=Path(args["hf"])
        )
        print("SERVING", values["policy_base_url"], flush=True)
        if args.get("adopt"):  # swap the given checkpoint in for both roles, as --cold-start does
            from autoenvscaling.graphs.models import Policy
            from autoenvscaling.graphs.cold_start.start import adopt_cold_start
            from autoenvscaling.training.checkpoints import CheckpointRegistry

            checkpoint = CheckpointRegistry(Path(args["adopt"])).current()
            current = Policy(model=values["policy_model"], base_url=values["policy_base_url"])
            run_checkpoints = Path(args["ctx"]["run_dir"]) / "checkpoints"
            policy = await adopt_cold_start(checkpoint, run_checkpoints, servers.embedded, current)
            values.update(policy_model=policy.model, policy_base_url=policy.base_url,
                          policy_checkpoint_id=checkpoint.id)
            print("ADOPTED", checkpoint.id, flush=True)
        ctx = FlywheelContext(**{**values, **args["ctx"]}).with_servers(servers)
        async with AsyncSqliteSaver.from_conn_string(args["db"]) as saver:
            graph = build_flywheel(checkpointer=saver)
            config = {"configurable": {"thread_id": "t"}, "recursion_limit": 500}
            if args["resume"]:
                state = await graph.aget_state(config)
                name = await run_policy.rebind_policy(
                    ctx, RunDir(Path(ctx.run_dir)), state.values.get("policy")
                )
                print("REBOUND", name, flush=True)
            payload = None if args["resume"] else {"rounds": args["ctx"]["rounds"]}
            final = await graph.ainvoke(payload, config, context=ctx)
            served = await servers.embedded.served_models()
            print("FINAL", json.dumps({"policy": final["policy"].model_dump(), "served": served,
                                       "rounds": [m.round for m in final["metrics"]]}), flush=True)

asyncio.run(main())
"""


def _zero_lora(hf: Path, registry: Path) -> str:
    """A LoRA adapter over `hf` (PEFT's default init: B = 0, so it answers as the base does),
    published as the current checkpoint of `registry`; its id."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    adapter = registry.parent / "adapter"
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(hf),
        LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
    )
    model.save_pretrained(adapter)
    return CheckpointRegistry(registry).publish(adapter, base_model=str(hf), kind="lora").id


# Out of the default run (`-m long`): the warm-up alone takes ~9 min on 2 cores. The swap does not
# wait for GRPO to publish (a flat reward group publishes nothing): the run adopts a LoRA checkpoint
# before its first node, as `--cold-start` does, so the kill always lands after a real swap.
@pytest.mark.long
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_kill_after_swap_then_resume_serves_the_adapter(engine_ready, tmp_path):
    pytest.importorskip("llama_cpp")
    pytest.importorskip("peft")
    from .test_embedded_round import TOUCH_TASK, _write, warmed_model

    hf, gguf = warmed_model(tmp_path / "warm")
    adopted = _zero_lora(hf, tmp_path / "adopt" / "registry")
    seed = _write(tmp_path / "seed" / "touch-done", TOUCH_TASK).parent
    run_dir = tmp_path / "run"
    ctx = {
        "run_dir": str(run_dir),
        "rounds": 1,
        "proposals": 1,
        "seed_dir": str(seed),
        "calibrate": False,
        "proposer_max_turns": 2,
        "arm": "error_feedback",
        "max_revisions": 0,
        "solver_max_turns": 2,
        "max_tokens": 128,
        "refresh_attempts": 1,
        "baseline_tasks": 1,
        "train_steps": 1,
        "num_generations": 4,
        "band_low": 0.0,
        "band_high": 1.0,
    }
    graph_db = run_dir / "graph.sqlite"
    common = {"gguf": str(gguf), "hf": str(hf), "db": str(graph_db), "ctx": ctx}
    env = {**os.environ, "HARBOR_TELEMETRY": "0", "PYTHONPATH": str(REPO)}
    run_dir.mkdir()
    first = subprocess.Popen(
        [
            sys.executable,
            "-c",
            DRIVER,
            json.dumps({**common, "resume": False, "adopt": str(tmp_path / "adopt" / "registry")}),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    # Kill once setup and inspect are saved (the run is proposing with the swapped-in adapter).
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline and first.poll() is None and _steps_saved(graph_db) < 3:
        time.sleep(1)
    assert first.poll() is None, (first.stdout.read() if first.stdout else "")[-3000:]
    assert _steps_saved(graph_db) >= 3, "the run never got past setup and inspect"
    os.killpg(first.pid, signal.SIGKILL)  # the run and its llama.cpp server, like an OOM kill
    first.wait()
    first_out = first.stdout.read() if first.stdout else ""
    assert f"ADOPTED {adopted}" in first_out.splitlines(), first_out[-3000:]
    lineage = json.loads((run_dir / "manifest.json").read_text())["policy_lineage"]
    assert lineage[0]["checkpoint"] == adopted and lineage[0]["round"] == 0
    second = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps({**common, "resume": True})],
        env=env,
        capture_output=True,
        text=True,
        timeout=2400,
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    lines = second.stdout.splitlines()
    # The new server (new port) loaded the adapter the saved state names, under its name.
    assert f"REBOUND {adopted}" in lines, second.stdout[-2000:]
    final = json.loads(next(line for line in lines if line.startswith("FINAL "))[6:])
    assert final["rounds"] == [1]
    checkpoint = final["policy"]["checkpoint_id"]
    assert checkpoint and checkpoint in final["served"]


def _steps_saved(graph_db: Path) -> int:
    """Step checkpoints of the flywheel graph itself on disk (what a resume continues from)."""
    import sqlite3

    if not graph_db.exists():
        return 0
    conn = sqlite3.connect(f"file:{graph_db}?mode=ro", uri=True, timeout=5)
    try:
        row = conn.execute("SELECT count(*) FROM checkpoints WHERE checkpoint_ns = ''").fetchone()
        return row[0]
    except sqlite3.OperationalError:  # the table is not created yet
        return 0
    finally:
        conn.close()
