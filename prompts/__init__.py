"""Prompt files (markdown package data): each role's and generation arm's instructions.

Text that code composes for a model lives with that code instead: the solver's tool
descriptions and result rendering (tools/agents/solver_interface.py), lint findings and gate verdicts.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files


@cache
def load_prompt(name: str) -> str:
    """The text of prompts/<name>.md; `str.format` fields in it are filled by the caller."""
    resource = files(__package__) / f"{name}.md"
    if not resource.is_file():
        available = sorted(
            p.name.removesuffix(".md")
            for p in files(__package__).iterdir()
            if p.name.endswith(".md")
        )
        raise FileNotFoundError(f"no prompt {name!r}; available: {', '.join(available)}")
    return resource.read_text()
