"""Hostile calls to the real MCP servers through the official client (in memory).

Filesystem: traversal, a concurrent folder/symlink swap, symlink loops, no existence oracle,
regex bombs, bounded walks, no host paths in errors. Rollouts: read-only storage without
creating files, clamped numbers, a wrong --db named plainly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from autoenvscaling.mcp_servers.filesystem import build_filesystem_server
from autoenvscaling.mcp_servers.rollouts import build_rollouts_server
from autoenvscaling.tools.files.models import FsLimits
from autoenvscaling.tools.rollouts.models import Attempt
from autoenvscaling.tools.rollouts.store import RolloutStore

from ..conftest import REPO

SECRET = "OUTSIDE-SECRET"


@pytest.fixture
def tree(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "inside.txt").write_text("inside\n")
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    (outside / f"{SECRET}-name.txt").write_text("x\n")
    os.symlink(outside, root / "out_dir")
    return root, outside


def connect(server):
    return create_connected_server_and_client_session(server._mcp_server)


async def call(session, tool, **args):
    result = await session.call_tool(tool, args)
    if result.isError:
        return None, result.content[0].text
    return result.structuredContent, None


@pytest.mark.timeout(60)
async def test_traversal_in_every_spelling_is_refused(tree):
    root, outside = tree
    server = build_filesystem_server(root)
    attempts = [
        "../outside/secret.txt",
        "sub/../../outside/secret.txt",
        "./../outside/secret.txt",
        "sub/./../../outside/secret.txt",
        str(outside / "secret.txt"),
        "out_dir/secret.txt",
        "out_dir/../out_dir/secret.txt",
        "sub\x00/inside.txt",
    ]
    async with connect(server) as client:
        for path in attempts:
            for tool, args in (
                ("read_file", {"path": path}),
                ("list_dir", {"path": path}),
                ("grep", {"pattern": "SECRET", "path": path}),
                ("write_file", {"path": path, "content": "pwned"}),
            ):
                data, error = await call(client, tool, **args)
                assert data is None, (tool, path, data)
                assert SECRET not in error and str(root) not in error
                if not path.startswith("/"):  # an absolute path is echoed as the client gave it
                    assert str(outside) not in error
    assert sorted(p.name for p in outside.iterdir()) == sorted(["secret.txt", f"{SECRET}-name.txt"])


@pytest.mark.timeout(60)
async def test_no_existence_oracle_behind_a_link_out(tree):
    root, outside = tree
    server = build_filesystem_server(root)
    async with connect(server) as client:
        _, present = await call(client, "read_file", path="out_dir/secret.txt")
        _, absent = await call(client, "read_file", path="out_dir/absent.txt")
        assert present.replace("secret.txt", "X") == absent.replace("absent.txt", "X")
        full, _ = await call(client, "glob", pattern="out_dir/*")
        (outside / "secret.txt").unlink()
        empty, _ = await call(client, "glob", pattern="out_dir/*")
        assert full == empty == {"pattern": "out_dir/*", "matches": [], "truncated": False}
        listing, _ = await call(client, "glob", pattern="**/*")
        assert not any(SECRET in m for m in listing["matches"])


@pytest.mark.timeout(60)
async def test_symlink_loops_end_quickly(tree):
    root, _ = tree
    os.symlink(".", root / "sub" / "self")
    os.symlink("../sub", root / "sub" / "parent")
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    server = build_filesystem_server(root)
    async with connect(server) as client:
        started = time.monotonic()
        data, _ = await call(client, "glob", pattern="**/*")
        assert "sub/inside.txt" in data["matches"]
        assert not any(m.count("self") > 1 for m in data["matches"])
        data, _ = await call(client, "grep", pattern="inside")
        assert [m["path"] for m in data["matches"]] == ["sub/inside.txt"]
        _, error = await call(client, "read_file", path="loop_a")
        assert "[symlink]" in error and "loop" in error
        assert time.monotonic() - started < 10


@pytest.mark.timeout(60)
async def test_walks_are_bounded(tmp_path):
    root = tmp_path / "root"
    folder = root
    for i in range(30):
        folder = folder / f"d{i}"
    folder.mkdir(parents=True)
    for i in range(300):
        (root / f"f{i}.txt").write_text("needle\n")
    server = build_filesystem_server(root, FsLimits(max_walk_entries=100, max_depth=10))
    async with connect(server) as client:
        data, _ = await call(client, "glob", pattern="**/*")
        assert data["truncated"] and len(data["matches"]) <= 100
        data, _ = await call(client, "grep", pattern="needle")
        assert data["truncated"]


@pytest.mark.timeout(60)
async def test_regex_bombs_finish_fast(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "bomb.txt").write_text(("a" * 40 + "!\n") * 50 + "a" * 5000 + "!\n")
    server = build_filesystem_server(root)
    async with connect(server) as client:
        for pattern in ("(a+)+$", "(a|aa)+$", "(a*)*b", "(?:a+){1,20}$", "^(a|a?)+$"):
            started = time.monotonic()
            data, error = await call(client, "grep", pattern=pattern)
            elapsed = time.monotonic() - started
            assert elapsed < 3, (pattern, elapsed)
            assert data is not None or "[bad_pattern]" in error


@pytest.mark.timeout(120)
async def test_concurrent_folder_symlink_swap_never_leaks(tree):
    """An agent swaps `sub` between a real folder and a link out while the server walks it."""
    root, outside = tree
    stop = threading.Event()
    swaps = 0

    def swapper():
        nonlocal swaps
        spare = root / ".spare"
        while not stop.is_set():
            try:
                os.rename(root / "sub", spare)
                os.symlink(outside, root / "sub")
                os.unlink(root / "sub")
                os.rename(spare, root / "sub")
                swaps += 1
            except OSError:
                pass

    server = build_filesystem_server(root)
    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    leaks = []
    try:
        async with connect(server) as client:
            for _ in range(300):
                for tool, args in (
                    ("list_dir", {"path": "sub"}),
                    ("glob", {"pattern": "sub/*"}),
                    ("glob", {"pattern": "**/*"}),
                    ("read_file", {"path": "sub/secret.txt"}),
                    ("grep", {"pattern": "SECRET", "path": "sub"}),
                ):
                    data, error = await call(client, tool, **args)
                    text = f"{data}{error}"
                    if SECRET in text or "secret.txt" in str(data):
                        leaks.append((tool, text[:200]))
    finally:
        stop.set()
        thread.join()
    assert swaps > 50, "the race never ran"
    assert not leaks, leaks[:5]


@pytest.mark.timeout(60)
async def test_unexpected_errors_show_no_host_path(tree):
    root, _ = tree
    server = build_filesystem_server(root)
    async with connect(server) as client:
        for tool, args in (
            ("write_file", {"path": "x" * 5000, "content": "y"}),
            ("read_file", {"path": "n" * 300}),
            ("write_file", {"path": "sub/inside.txt/child", "content": "y"}),
            ("list_dir", {"path": "sub/inside.txt"}),
        ):
            data, error = await call(client, tool, **args)
            assert data is None and str(root) not in error and "/tmp" not in error, error


# --------------------------------------------------------------------------- rollouts


def _store(path):
    with RolloutStore(path) as store:
        for i in range(3):
            store.record_attempt(
                Attempt(id=f"a{i}", task_id="t", policy_version="v1", outcome="solved", reward=1.0)
            )


@pytest.mark.timeout(60)
async def test_rollouts_reader_creates_no_files_and_clamps_numbers(tmp_path):
    db = tmp_path / "store" / "rollouts.db"
    _store(db)
    assert sorted(p.name for p in db.parent.iterdir()) == ["rollouts.db"]
    assert db.read_bytes()[18:20] == b"\x02\x02"  # the header says: WAL mode
    server = build_rollouts_server(db)
    async with connect(server) as client:
        data, error = await call(client, "list_attempts", offset=10**30, limit=10**30)
        assert error is None and data["attempts"] == []
        data, error = await call(client, "list_attempts", offset=-(10**30), limit=-5)
        assert error is None and len(data["attempts"]) == 1
        data, error = await call(
            client, "get_trajectory", attempt_id="a0", start_step=10**30, max_steps=10**30
        )
        assert error is None and data["steps"] == []
        data, error = await call(client, "rollout_summary")
        assert error is None
    assert sorted(p.name for p in db.parent.iterdir()) == ["rollouts.db"]


@pytest.mark.timeout(60)
async def test_rollouts_reader_sees_a_live_writer(tmp_path):
    db = tmp_path / "rollouts.db"
    _store(db)
    server = build_rollouts_server(db)
    async with connect(server) as client:
        data, _ = await call(client, "list_attempts")
        assert len(data["attempts"]) == 3
        writer = RolloutStore(db)  # stays open: its -wal file is live
        writer.record_attempt(Attempt(id="late", task_id="t", policy_version="v1"))
        data, _ = await call(client, "list_attempts")
        assert "late" in [a["id"] for a in data["attempts"]]
        writer.close()


@pytest.mark.timeout(60)
def test_rollouts_cli_names_a_wrong_db_plainly(tmp_path):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    for db, words in ((folder, "is a folder"), (junk, "not a rollout store")):
        done = subprocess.run(
            [sys.executable, "-m", "autoenvscaling.cli.main", "mcp", "rollouts", "--db", str(db)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"},
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 2, done.stderr[-2000:]
        assert words in " ".join(done.stderr.split()), done.stderr[-2000:]
        assert "disk I/O error" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-folder", "junk.db"]
    shutil.rmtree(folder)
