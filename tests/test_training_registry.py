"""Checkpoint registry: atomic publish, CURRENT pointer, lineage, and what a crash leaves behind.

The crash tests kill a real child process in the middle of publishing (SIGKILL, no cleanup) and
then read the registry from this process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autoenvscaling.training.checkpoints import CheckpointRegistry, RegistryError


def _weights(folder: Path, payload: str = "w") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text('{"r": 8}')
    (folder / "adapter_model.safetensors").write_text(payload * 1000)
    return folder


def test_publish_lineage_and_current(tmp_path: Path) -> None:
    reg = CheckpointRegistry(tmp_path / "reg")
    assert reg.current() is None and reg.list() == []

    a = reg.publish(
        _weights(tmp_path / "a"),
        base_model="tiny",
        kind="lora",
        job_id="job-1",
        metrics={"reward_mean": 0.25},
    )
    b = reg.publish(
        _weights(tmp_path / "b"), base_model="tiny", kind="lora", parent_id=a.id, job_id="job-2"
    )
    c = reg.publish(
        _weights(tmp_path / "c"), base_model="tiny", kind="full", parent_id=b.id, make_current=False
    )

    assert reg.current_id() == b.id  # c was published without becoming current
    assert (c.parent_id, b.parent_id, a.parent_id) == (b.id, a.id, None)
    assert [x.id for x in reg.list()] == [a.id, b.id, c.id]
    assert [x.id for x in reg.children(a.id)] == [b.id]
    got = reg.get(a.id)
    assert got.metrics == {"reward_mean": 0.25} and got.job_id == "job-1"
    assert (got.path / "adapter_config.json").read_text() == '{"r": 8}'
    assert (tmp_path / "a").exists()  # copied, not moved, by default

    reg.set_current(a.id)
    assert CheckpointRegistry(tmp_path / "reg").current().id == a.id  # a fresh reader agrees
    reg.set_current(None)
    assert reg.current() is None


def test_publish_refuses_bad_input(tmp_path: Path) -> None:
    reg = CheckpointRegistry(tmp_path / "reg")
    with pytest.raises(RegistryError, match="parent checkpoint"):
        reg.publish(_weights(tmp_path / "a"), base_model="m", kind="lora", parent_id="nope")
    with pytest.raises(RegistryError, match="does not exist"):
        reg.publish(tmp_path / "missing", base_model="m", kind="lora")
    with pytest.raises(RegistryError, match="invalid checkpoint id"):
        reg.publish(_weights(tmp_path / "b"), base_model="m", kind="lora", checkpoint_id="../x")
    with pytest.raises(RegistryError, match="not published"):
        reg.set_current("ghost")
    assert reg.list() == [] and reg.current() is None
    assert list(reg.staging_dir.iterdir()) == []  # failed publishes leave no staging behind


def test_move_publish_and_registry_relocation(tmp_path: Path) -> None:
    reg = CheckpointRegistry(tmp_path / "reg")
    ckpt = reg.publish(_weights(tmp_path / "w"), base_model="m", kind="lora", move=True)
    assert not (tmp_path / "w").exists()
    os.rename(tmp_path / "reg", tmp_path / "moved")
    moved = CheckpointRegistry(tmp_path / "moved")
    assert moved.current().path == tmp_path / "moved" / "checkpoints" / ckpt.id / "weights"


_CRASHING_PUBLISHER = textwrap.dedent("""
    import shutil, sys, time
    from pathlib import Path
    from autoenvscaling.training.checkpoints import CheckpointRegistry

    reg = CheckpointRegistry(sys.argv[1])
    real_copytree = shutil.copytree

    def slow_copytree(src, dst, **kw):
        real_copytree(src, dst, **kw)
        print("COPIED", flush=True)
        time.sleep(60)  # killed here: weights staged, manifest not written, nothing renamed

    shutil.copytree = slow_copytree
    reg.publish(Path(sys.argv[2]), base_model="m", kind="lora", checkpoint_id="half")
""")


def test_crash_mid_publish_leaves_previous_current(tmp_path: Path) -> None:
    reg = CheckpointRegistry(tmp_path / "reg")
    good = reg.publish(_weights(tmp_path / "good"), base_model="m", kind="lora")
    script = tmp_path / "crash.py"
    script.write_text(_CRASHING_PUBLISHER)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "reg"), str(_weights(tmp_path / "new"))],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "COPIED"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    after = CheckpointRegistry(tmp_path / "reg")
    assert after.current_id() == good.id
    assert [c.id for c in after.list()] == [good.id]
    assert not after.exists("half")
    assert len(list(after.staging_dir.iterdir())) == 1  # the half-written stage, never listed
    assert after.sweep_staging() and list(after.staging_dir.iterdir()) == []


def test_current_pointer_is_never_torn(tmp_path: Path) -> None:
    """A reader polling CURRENT while a writer flips it sees only whole, published ids."""
    reg = CheckpointRegistry(tmp_path / "reg")
    ids = [
        reg.publish(_weights(tmp_path / f"w{i}"), base_model="m", kind="lora").id for i in range(2)
    ]
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        from autoenvscaling.training.checkpoints import CheckpointRegistry
        reg = CheckpointRegistry({str(tmp_path / "reg")!r})
        for i in range(300):
            reg.set_current({ids!r}[i % 2])
    """),
        ]
    )
    seen = set()
    while writer.poll() is None:
        seen.add(reg.current_id())
        time.sleep(0.001)
    assert writer.returncode == 0
    assert seen <= set(ids) and seen
