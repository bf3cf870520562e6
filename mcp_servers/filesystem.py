"""MCP filesystem server: read, write, edit, list, glob and grep inside one root folder.

A thin face over `tools.files.rooted`: paths are relative to the root; anything that resolves outside
it (`..`, absolute paths, symlinks pointing out) is refused with a reason code and a message.
Every error a client sees names paths only as the client gave them: never the root's place on
this machine (an unexpected error is reported by its type and a scrubbed message).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations

from ..tools.files.models import (
    EditResult,
    FsLimits,
    GlobResult,
    GrepResult,
    ListResult,
    ReadResult,
    WriteResult,
)
from ..tools.files.rooted import RootedFs
from ..tools.files.safe_paths import PathRefusedError
from .host_paths import scrubber

T = TypeVar("T")

READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=False)
WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)


def build_filesystem_server(
    root: str | os.PathLike[str], limits: FsLimits | None = None, *, name: str = "filesystem"
) -> FastMCP:
    fs = RootedFs(root, limits)
    scrub = scrubber({os.fspath(root): "<root>", str(fs.safe.root): "<root>"})

    async def run(fn: Callable[[], T]) -> T:
        try:
            return await anyio.to_thread.run_sync(fn)
        except PathRefusedError as exc:
            raise ToolError(scrub(str(exc))) from None
        except OSError as exc:  # str(exc) would name the file by its host path
            raise ToolError(f"[invalid] {exc.strerror or type(exc).__name__}") from None
        except Exception as exc:  # noqa: BLE001 - reported to the client without host paths
            raise ToolError(f"[invalid] {type(exc).__name__}: {scrub(str(exc))}") from None

    server = FastMCP(
        name,
        # INFO would log every request (and set the root logger's level in embedding apps).
        log_level="WARNING",
        instructions=(
            "Files inside one folder. Paths are relative to that folder; '..', absolute paths and "
            "symlinks leading outside are refused. Read large files by line ranges."
        ),
    )

    @server.tool(annotations=READ_ONLY)
    async def read_file(path: str, start_line: int = 1, end_line: int | None = None) -> ReadResult:
        """Read lines start_line..end_line (1-based, inclusive) of a text file.

        Output is capped; when `next_start_line` is set, call again from there for more.
        """
        return await run(lambda: fs.read(path, start_line, end_line))

    @server.tool(annotations=WRITES)
    async def write_file(path: str, content: str) -> WriteResult:
        """Create or overwrite a file with `content` (missing parent folders are created)."""
        return await run(lambda: fs.write(path, content))

    @server.tool(annotations=WRITES)
    async def edit_file(path: str, old_text: str, new_text: str) -> EditResult:
        """Replace `old_text` with `new_text` in a file. `old_text` must occur exactly once:
        copy it exactly from read_file output, with enough context to be unique."""
        return await run(lambda: fs.edit(path, old_text, new_text))

    @server.tool(annotations=READ_ONLY)
    async def list_dir(path: str = ".") -> ListResult:
        """List a folder's entries (name, kind, size)."""
        return await run(lambda: fs.list(path))

    @server.tool(annotations=READ_ONLY)
    async def glob(pattern: str, path: str = ".") -> GlobResult:
        """Paths under `path` matching a glob pattern; `**` matches any number of folders."""
        return await run(lambda: fs.glob(pattern, path))

    @server.tool(annotations=READ_ONLY)
    async def grep(
        pattern: str,
        path: str = ".",
        include: str | None = None,
        ignore_case: bool = False,
        fixed_string: bool = False,
    ) -> GrepResult:
        """Lines matching a regular expression in files under `path` (a file or folder).

        `include` filters file names by glob (e.g. '*.py'); `fixed_string` matches literally.
        """
        return await run(
            lambda: fs.grep(
                pattern, path, include=include, ignore_case=ignore_case, fixed=fixed_string
            )
        )

    return server
