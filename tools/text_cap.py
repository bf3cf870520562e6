"""Cap text to a byte budget, keeping what a reader needs most, with a visible truncation marker.

Tool outputs and error texts are kept head + tail (a command's first lines say what it did, its
last lines say how it ended); error excerpts keep only the tail.
"""

from __future__ import annotations

from pydantic import BaseModel

# Same wording as the persistent shell's marker, so a model sees one convention everywhere.
TRUNCATION_MARK = "\n[... {n} bytes truncated ...]\n"


class CappedText(BaseModel):
    text: str
    total_bytes: int
    truncated: bool


def cap_text(text: str, limit: int) -> CappedText:
    """Keep the first and last `limit // 2` bytes of `text` (UTF-8) with a marker in between."""
    data = text.encode("utf-8", errors="replace")
    total = len(data)
    if total <= limit:
        return CappedText(text=text, total_bytes=total, truncated=False)
    half = max(limit // 2, 1)
    head = data[:half].decode("utf-8", errors="ignore")
    tail = data[-half:].decode("utf-8", errors="ignore")
    dropped = total - 2 * half
    return CappedText(
        text=head + TRUNCATION_MARK.format(n=dropped) + tail, total_bytes=total, truncated=True
    )


def tail_text(text: str, limit: int) -> CappedText:
    """Keep the last `limit` bytes of `text` (UTF-8), marking what was dropped before them."""
    data = text.encode("utf-8", errors="replace")
    total = len(data)
    if total <= limit:
        return CappedText(text=text, total_bytes=total, truncated=False)
    tail = data[-limit:].decode("utf-8", errors="ignore")
    return CappedText(
        text=f"[... {total - limit} bytes truncated ...]\n" + tail,
        total_bytes=total,
        truncated=True,
    )
