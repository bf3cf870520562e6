"""The cheat agent: a model told to get the reward without doing the task, judged on its outputs.

`CheatAuditAgent` wraps any Harbor agent (by default the solver's: same MCP terminal, same budget,
the system prompt `prompts/cheat.md`) and lists the image before and after it, so the gate knows
which files it wrote. When it scores >= the threshold, `judge` compares those files with the
oracle's outputs: a cheat whose declared outputs equal the oracle's (exactly or after
normalisation) did the task after all; otherwise it got the reward without doing it, and the
summary of what it wrote goes back to the proposer.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, override

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

from ...trials.script_agent import PlainAgent
from .leaks import fingerprint
from .probes import NOT_OUTPUTS, list_image

CHEAT_PROMPT = "cheat"
MAX_FILES = 50
MAX_BYTES = 1_000_000


def solver_cheat_kwargs(
    solver_agent: str, model: str, base_url: str | None, max_turns: int
) -> dict[str, Any]:
    """The solver agent's settings for a cheat run: its tools and budget, the cheat prompt."""
    return {
        "inner": solver_agent,
        "inner_kwargs": {
            "settings": {
                "model": {"model": model, "base_url": base_url},
                "budget": {"max_turns": max_turns},
                "system_prompt": CHEAT_PROMPT,
            }
        },
    }


class CheatAuditAgent(PlainAgent):
    """Runs `inner` (an import path 'module:Class') and records the files it changed."""

    def __init__(
        self,
        logs_dir: Path,
        *args: Any,
        inner: str,
        inner_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(logs_dir, *args, **kwargs)
        module, _, name = inner.partition(":")
        cls = getattr(importlib.import_module(module), name)
        self.inner_path = inner
        self.inner: BaseAgent = cls(logs_dir, *args, **(inner_kwargs or {}), **kwargs)

    @staticmethod
    @override
    def name() -> str:
        return "autoenvscaling-cheat-audit"

    @override
    async def setup(self, environment: BaseEnvironment) -> None:
        await self.inner.setup(environment)

    @override
    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        before = await list_image(environment, self.logs_dir / "cheat-listing-before.bin")
        error = None
        try:
            await self.inner.run(instruction, environment, context)
        except Exception as exc:  # noqa: BLE001 - its failure is reported; the verifier still runs
            error = f"{type(exc).__name__}: {exc}"
        after = await list_image(environment, self.logs_dir / "cheat-listing-after.bin")
        changed = sorted(
            p
            for p, v in after.items()
            if before.get(p) != v and not p.startswith(NOT_OUTPUTS) and v[0] <= MAX_BYTES
        )[:MAX_FILES]
        files: dict[str, Any] = {}
        for i, path in enumerate(changed):
            local = self.logs_dir / f"cheat-file-{i}"
            try:
                await environment.download_file(path, local)
            except Exception:  # noqa: BLE001 - a file it deleted again; not worth failing for
                continue
            data = local.read_bytes()
            files[path] = fingerprint(data)
        deleted = sorted(p for p in before if p not in after)[:MAX_FILES]
        context.metadata = {
            **(context.metadata or {}),
            "cheat_agent": self.inner_path,
            "written": files,
            "deleted": deleted,
            "error": error,
        }


def judge(
    written: dict[str, Any], oracle_outputs: dict[str, dict[str, Any]]
) -> tuple[bool, list[str]]:
    """(did the task, differences): the task counts as done when every oracle output the cheat
    agent was judged on holds the same content (exactly or normalised) in its final state."""
    differences = []
    for path, expected in sorted(oracle_outputs.items()):
        got = written.get(path)
        if got is None:
            differences.append(f"{path} not written")
        elif got["sha256"] != expected["sha256"] and (
            got["normalised"] is None or got["normalised"] != expected["normalised"]
        ):
            differences.append(f"{path} differs from the oracle's ({got['head'][:60]!r})")
    return (not differences and bool(oracle_outputs)), differences


def summary(written: dict[str, Any], deleted: list[str]) -> str:
    parts = [f"wrote {p} ({w['size']} bytes: {w['head'][:60]!r})" for p, w in written.items()]
    parts += [f"deleted {p}" for p in deleted]
    return "; ".join(parts[:8]) + (f"; +{len(parts) - 8} more" if len(parts) > 8 else "")
