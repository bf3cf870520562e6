"""Write a file so that a reader finds the old content or the new, never half of either."""

from __future__ import annotations

import os
from pathlib import Path


def write_whole(path: Path, text: str) -> None:
    """`text` into `path` through a temporary file beside it, renamed over it: atomic on one
    filesystem. The temporary name carries the process id, so processes writing the same file
    at once each rename a whole file of their own (the last one wins)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
