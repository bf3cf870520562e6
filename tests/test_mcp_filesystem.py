"""The filesystem MCP server through a real MCP client (in memory), escapes first."""

from __future__ import annotations

import os
import shutil

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from autoenvscaling.mcp_servers.filesystem import build_filesystem_server
from autoenvscaling.tools.files.models import FsLimits
from autoenvscaling.tools.files.safe_paths import PathRefusedError, SafeRoot

LIMITS = FsLimits(
    max_file_bytes=100_000,
    max_read_bytes=2_000,
    max_write_bytes=50_000,
    max_entries=50,
    max_matches=5,
)


@pytest.fixture
def tree(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "docs").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET token\n")
    (root / "docs" / "a.txt").write_text("alpha\nbeta\ngamma\n")
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text(
        "def main():\n    return 1\n\n\ndef other():\n    return 1\n"
    )
    os.symlink(outside / "secret.txt", root / "out_link")  # file symlink pointing out
    os.symlink(outside, root / "out_dir")  # symlinked parent pointing out
    os.symlink("docs/a.txt", root / "in_link")  # stays inside: allowed
    os.symlink(tmp_path / "outside" / "not-yet.txt", root / "dangling_out")
    os.symlink("out_link", root / "chain")  # inside -> inside -> outside
    return root, outside


@pytest.fixture
def server(tree):
    root, _ = tree
    return build_filesystem_server(root, LIMITS)


def connect(server):
    # Opened inside each test, not in a fixture: anyio needs one task to enter and leave it.
    return create_connected_server_and_client_session(server._mcp_server)


async def call(session, tool, **args):
    result = await session.call_tool(tool, args)
    if result.isError:
        return None, result.content[0].text
    return result.structuredContent, None


@pytest.mark.parametrize(
    ("tool", "args", "reason"),
    [
        ("read_file", {"path": "../outside/secret.txt"}, "traversal"),
        ("read_file", {"path": "docs/../../outside/secret.txt"}, "traversal"),
        ("read_file", {"path": "/etc/passwd"}, "absolute"),
        ("read_file", {"path": "out_link"}, "symlink"),
        ("read_file", {"path": "chain"}, "symlink"),
        ("read_file", {"path": "out_dir/secret.txt"}, "symlink"),
        ("write_file", {"path": "out_dir/new.txt", "content": "x"}, "symlink"),
        ("write_file", {"path": "dangling_out", "content": "x"}, "symlink"),
        ("write_file", {"path": "../escape.txt", "content": "x"}, "traversal"),
        ("edit_file", {"path": "out_link", "old_text": "TOP", "new_text": "x"}, "symlink"),
        ("list_dir", {"path": "out_dir"}, "symlink"),
        ("list_dir", {"path": ".."}, "traversal"),
        ("glob", {"pattern": "../*"}, "traversal"),
        ("glob", {"pattern": "/etc/*"}, "absolute"),
        ("grep", {"pattern": "SECRET", "path": "out_dir"}, "symlink"),
        ("read_file", {"path": "docs/a.txt\x00"}, "invalid"),
    ],
)
async def test_escapes_are_refused_with_a_reason(server, tree, tool, args, reason):
    async with connect(server) as client:
        _, outside = tree
        data, error = await call(client, tool, **args)
        assert data is None
        assert f"[{reason}]" in error
        assert "TOP SECRET" not in error
        assert sorted(p.name for p in outside.iterdir()) == [
            "secret.txt"
        ]  # nothing written outside
        assert (outside / "secret.txt").read_text() == "TOP SECRET token\n"


async def test_absolute_path_error_says_what_to_do(server, tree):
    async with connect(server) as client:
        _, outside = tree
        _, error = await call(client, "read_file", path=str(outside / "secret.txt"))
        assert "[absolute]" in error and "relative to the root" in error
        _, error = await call(client, "read_file", path="out_dir/secret.txt")
        assert "'out_dir' is a symlink" in error and "outside the root" in error


async def test_glob_and_grep_never_show_outside_content(server):
    async with connect(server) as client:
        data, _ = await call(client, "glob", pattern="**/*")
        assert "out_dir/secret.txt" not in data["matches"]
        assert "docs/a.txt" in data["matches"]
        data, _ = await call(client, "glob", pattern="out_dir/*")
        assert data["matches"] == [] and not data["truncated"]  # links out are never entered
        data, _ = await call(client, "grep", pattern="SECRET")
        assert data["matches"] == []
        assert data["skipped"] >= 2  # out_link and chain


async def test_symlink_inside_root_is_followed(server):
    async with connect(server) as client:
        data, error = await call(client, "read_file", path="in_link")
        assert error is None and data["content"] == "alpha\nbeta\ngamma\n"
        assert data["path"] == "docs/a.txt"
        data, _ = await call(
            client, "read_file", path="docs/../docs/a.txt", start_line=2, end_line=2
        )
        assert data["content"] == "beta\n" and data["next_start_line"] is None
        data, _ = await call(client, "list_dir", path=".")
        kinds = {e["name"]: (e["kind"], e["target"]) for e in data["entries"]}
        assert kinds["in_link"] == ("symlink", "docs/a.txt")
        assert kinds["out_link"] == ("symlink", None)  # target outside: not disclosed
        assert kinds["docs"] == ("dir", None)


async def test_huge_files_are_refused_and_big_reads_are_paged(server, tree):
    async with connect(server) as client:
        root, _ = tree
        (root / "huge.log").write_bytes(b"line\n" * 40_000)  # 200 KB > max_file_bytes
        _, error = await call(client, "read_file", path="huge.log")
        assert "[too_large]" in error and "200,000 bytes" in error
        _, error = await call(client, "edit_file", path="huge.log", old_text="line", new_text="x")
        assert "[too_large]" in error
        _, error = await call(client, "write_file", path="big.txt", content="x" * 60_000)
        assert "[too_large]" in error and not (root / "big.txt").exists()
        data, _ = await call(client, "grep", pattern="line")
        assert all(m["path"] != "huge.log" for m in data["matches"])

        (root / "medium.txt").write_text("".join(f"row {i:04d}\n" for i in range(1000)))  # 9 KB
        first, _ = await call(client, "read_file", path="medium.txt")
        assert first["truncated"] and len(first["content"].encode()) <= LIMITS.max_read_bytes
        assert first["content"].startswith("row 0000\n")
        nxt = first["next_start_line"]
        second, _ = await call(client, "read_file", path="medium.txt", start_line=nxt)
        assert second["content"].startswith(f"row {nxt - 1:04d}\n")
        assert first["total_lines"] == 1000


async def test_binary_and_special_files_are_refused(server, tree):
    async with connect(server) as client:
        root, _ = tree
        (root / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02")
        _, error = await call(client, "read_file", path="blob.bin")
        assert "[binary]" in error
        os.mkfifo(root / "pipe")
        _, error = await call(client, "read_file", path="pipe")  # must not block
        assert "[not_a_file]" in error
        _, error = await call(client, "read_file", path="docs")
        assert "[not_a_file]" in error


async def test_write_edit_list_glob_grep(server, tree):
    async with connect(server) as client:
        root, _ = tree
        data, error = await call(
            client, "write_file", path="new/dir/file.txt", content="one\ntwo\n"
        )
        assert error is None and data == {
            "path": "new/dir/file.txt",
            "bytes_written": 8,
            "created": True,
        }
        data, _ = await call(
            client, "write_file", path="new/dir/file.txt", content="one\ntwo\nthree\n"
        )
        assert data["created"] is False
        assert (root / "new/dir/file.txt").read_text() == "one\ntwo\nthree\n"

        data, _ = await call(
            client, "edit_file", path="new/dir/file.txt", old_text="two", new_text="2"
        )
        assert data["line"] == 2 and (root / "new/dir/file.txt").read_text() == "one\n2\nthree\n"
        _, error = await call(
            client, "edit_file", path="src/main.py", old_text="return 1", new_text="return 2"
        )
        assert "[not_unique]" in error and "2 times" in error
        _, error = await call(
            client, "edit_file", path="src/main.py", old_text="nope", new_text="x"
        )
        assert "[not_found]" in error
        data, _ = await call(
            client,
            "edit_file",
            path="src/main.py",
            old_text="def other():\n    return 1",
            new_text="def other():\n    return 2",
        )
        assert data["line"] == 5
        assert (root / "src/main.py").read_text().endswith("return 2\n")
        # No temporary files are left behind by the atomic writes.
        assert sorted(p.name for p in (root / "src").iterdir()) == ["main.py"]

        data, _ = await call(client, "glob", pattern="**/*.py")
        assert data["matches"] == ["src/main.py"]
        data, _ = await call(client, "grep", pattern=r"def \w+", include="*.py")
        assert [(m["path"], m["line"]) for m in data["matches"]] == [
            ("src/main.py", 1),
            ("src/main.py", 5),
        ]
        data, _ = await call(client, "grep", pattern="ALPHA", ignore_case=True, path="docs")
        assert data["matches"] == [{"path": "docs/a.txt", "line": 1, "text": "alpha"}]
        data, _ = await call(client, "grep", pattern="(", fixed_string=True)
        assert data["matches"][0]["text"] == "def main():"
        _, error = await call(client, "grep", pattern="(")
        assert "[bad_pattern]" in error
        (root / "many.txt").write_text("hit\n" * 20)
        data, _ = await call(client, "grep", pattern="hit", path="many.txt")
        assert len(data["matches"]) == LIMITS.max_matches and data["truncated"]


def test_a_folder_swapped_for_a_link_mid_walk_is_not_followed(tree):
    root, outside = tree
    (root / "sub").mkdir()
    (root / "sub" / "f.txt").write_text("inside")
    safe = SafeRoot(root)
    with safe.walk("sub/f.txt") as where:
        # An agent with a terminal swaps the folder for a symlink after the walk opened it:
        # the walk holds the folder's descriptor, so the file it opens is still the inside one.
        shutil.rmtree(root / "sub")
        os.symlink(outside, root / "sub")
        with pytest.raises(FileNotFoundError):
            os.open(where.name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=where.dir_fd)
    with pytest.raises(PathRefusedError) as refused, safe.walk("sub/secret.txt"):
        pass
    assert refused.value.reason == "symlink"


async def test_tools_are_listed_with_schemas(server):
    async with connect(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"read_file", "write_file", "edit_file", "list_dir", "glob", "grep"}
        assert tools["read_file"].outputSchema["properties"]["next_start_line"]
        assert tools["read_file"].annotations.readOnlyHint is True
        assert tools["write_file"].annotations.readOnlyHint is False
