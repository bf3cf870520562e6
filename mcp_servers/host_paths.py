"""Host paths kept out of what an MCP client sees: a server's folder or file is named in an
error by a placeholder (`<root>`, `<store>`), never by its place on this machine.

A server names the places it was given; each is also hidden in its resolved form (a link or a
relative path reaches the same text), longest first, so a file inside a hidden folder becomes
the file's placeholder rather than the folder's followed by the rest of its path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping


def scrubber(places: Mapping[str, str]) -> Callable[[str], str]:
    """A function that replaces each host path of `places` (path -> placeholder) in a text."""
    forms: dict[str, str] = {}
    for path, placeholder in places.items():
        for form in (path, os.path.realpath(path), os.path.abspath(path)):
            if len(form.rstrip("/")) > 1:  # never "/" or "": that would rewrite every path
                forms.setdefault(form.rstrip("/"), placeholder)
    ordered = sorted(forms.items(), key=lambda item: len(item[0]), reverse=True)

    def scrub(text: str) -> str:
        for form, placeholder in ordered:
            text = text.replace(form, placeholder)
        return text

    return scrub
