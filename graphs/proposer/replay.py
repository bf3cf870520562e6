"""Replay a task's authoring through the served proposer: verified proposer trajectories.

For a finished task folder (a seed task, an admitted candidate), a scripted model plays the
proposer of round 1: it reads the brief, writes each file of the task, runs the gate's quick
`check` (lint), has the terminal syntax-check its scripts and submits. A file is written either as
a `<file path="...">` block in a reply (`file_blocks`: the episode loop writes it to the folder
with `write_file`'s path checks; its content needs no JSON escaping, which a 135M model gets
wrong) or as a `write_file` call. The attempt is the SAME `propose()` the flywheel runs: real
MCP servers, a real workspace sandbox, the full gate after `submit`, the transcript the
proposer's training reads. Only the model's replies are scripted; every tool result is what the
tool returned. An episode is kept only when the gate admits what it submitted, against a pool
that does not hold the task (the task's own folder is left out of the pool dedup compares with).

Calibration needs a solver, which a cold start does not have yet: the gate admits up to dedup and
says "calibrate NOT RUN" (graphs/cold_start/start.py states it in the dataset's card).
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ...tools.agents.brief import build_brief
from ..agent.scripted_model import register, reply, tool_call
from ..models import ModelConfig
from .record import propose
from .settings import ProposerSettings, gate_config, proposer_budget

#: The order a task author writes files in: what it is, what it asks, where it runs, how it is
#: solved, how it is checked.
_ORDER = ("task.toml", "instruction.md", "environment/", "solution/", "tests/")
#: Files larger than this are not replayed (one file's reply must stay a reasonable turn).
MAX_FILE_CHARS = 6000

#: How the scripted proposer writes a file: a `<file>` block in its reply, or a `write_file` call.
FileForm = Literal["file_blocks", "write_file"]


class NotAuthorableError(ValueError):
    """The task cannot be written in a reply (a binary or oversized file)."""


class ServedProposer(BaseModel):
    """How the run serves its proposer: the replayed episode must read as a served one does
    (RunConfig's fields of the same names; the embedded preset's values by default)."""

    compact_prompt: bool = True
    brief_examples: int = Field(default=1, ge=0)
    brief_file_chars: int = Field(default=1200, ge=1)
    band: tuple[float, float] = (0.25, 0.75)


class AuthoringResult(BaseModel):
    task_id: str
    kept: bool = False
    reason: str = ""
    attempt_id: str | None = None
    files: int = 0
    stage: str | None = Field(default=None, description="The gate stage that decided.")
    duration_sec: float = 0.0


def authoring_files(task_dir: Path) -> list[tuple[str, str]]:
    """(relative path, text) of every file of the task, in authoring order."""
    files = sorted(p for p in task_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    out = []
    for path in files:
        rel = path.relative_to(task_dir).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise NotAuthorableError(f"{rel} is not text: a reply cannot author it") from None
        if len(text) > MAX_FILE_CHARS:
            raise NotAuthorableError(f"{rel} has {len(text)} characters (> {MAX_FILE_CHARS})")
        out.append((rel, text))
    return sorted(out, key=lambda f: (_rank(f[0]), f[0]))


def _rank(rel: str) -> int:
    return next((i for i, p in enumerate(_ORDER) if rel == p or rel.startswith(p)), len(_ORDER))


def _what(rel: str) -> str:
    if rel == "task.toml":
        return "The task's metadata and limits."
    if rel == "instruction.md":
        return "What the solver is asked to do."
    if rel.startswith("environment/"):
        return f"The container the solver works in: {rel}."
    if rel.startswith("solution/"):
        return f"The reference solution: {rel}."
    return f"The verifier: {rel}."


def _write(rel: str, text: str, form: FileForm) -> Any:
    if form == "write_file":
        return reply(_what(rel), tool_call("write_file", path=rel, content=text))
    # The brief's own block layout (tools/tasks/file_blocks.py renders tasks the same way).
    return reply(f'{_what(rel)}\n<file path="{rel}">\n{text.rstrip(chr(10))}\n</file>')


def authoring_script(task_dir: Path, form: FileForm = "file_blocks") -> list[Any]:
    """The proposer's replies: one file per turn, a lint check, a syntax check, submit."""
    files = authoring_files(task_dir)
    instruction = dict(files).get("instruction.md", "").strip().splitlines()
    summary = (instruction[0] if instruction else task_dir.name).lstrip("# ").strip()[:200]
    scripts = [rel for rel, _ in files if rel.endswith(".sh")]
    replies: list[Any] = [_write(rel, text, form) for rel, text in files]
    replies.append(reply("A quick static check first.", tool_call("check", until="lint")))
    if scripts:
        command = " && ".join(f"bash -n {s}" for s in scripts) + " && echo syntax ok"
        replies.append(reply("The scripts must parse.", tool_call("run", command=command)))
    replies.append(reply("The task is complete.", tool_call("submit", summary=summary)))
    return replies


def _pool_without(pool_dir: Path, task_id: str, into: Path) -> Path:
    """A copy of the pool without `task_id`: the gate's dedup then compares with the others."""
    pool = into / "pool"
    for task in sorted(Path(pool_dir).iterdir()):
        if task.name != task_id and (task / "task.toml").is_file():
            shutil.copytree(task, pool / task.name, symlinks=True)
    pool.mkdir(parents=True, exist_ok=True)
    return pool


async def replay_authoring(
    task_dir: Path,
    *,
    pool_dir: Path,
    store_path: Path,
    out_dir: Path,
    backend: str = "podman",
    run_id: str = "cold-start",
    round_: int = 1,
    served: ServedProposer | None = None,
    form: FileForm = "file_blocks",
) -> AuthoringResult:
    """One task's authoring as a proposer attempt; kept when the gate admits it."""
    started = time.monotonic()
    task_dir = Path(task_dir).resolve()
    result = AuthoringResult(task_id=task_dir.name)
    try:
        files = authoring_files(task_dir)
        script = authoring_script(task_dir, form)
    except (NotAuthorableError, OSError) as exc:
        result.reason = f"not authorable: {exc}"
        return result
    result.files = len(files)
    with tempfile.TemporaryDirectory(prefix="authoring-pool-") as scratch:
        pool = _pool_without(pool_dir, task_dir.name, Path(scratch))
        served = served or ServedProposer()
        brief = build_brief(
            store_path,
            pool,
            round=round_,
            band=served.band,
            n_examples=served.brief_examples,
            max_file_chars=served.brief_file_chars,
        )
        name = register(f"author-{task_dir.name}-{secrets.token_hex(4)}", script)
        settings = ProposerSettings(
            model=ModelConfig(model=name),
            budget=proposer_budget(len(script) + 1),
            max_revisions=0,
            compact_prompt=served.compact_prompt,
            gate=gate_config(backend=backend, pool_dir=pool, band=served.band),
            store_path=str(store_path),
            run_id=run_id,
            round=round_,
            policy_version="reference-authoring",
            # The candidate folder is named by the id's first 12 characters: random ones first.
            attempt_id=f"a{secrets.token_hex(6)}-{task_dir.name}"[:100],
        )
        proposal = await propose(brief, settings, out_dir=out_dir)
    result.attempt_id = proposal.attempt_id
    result.duration_sec = round(time.monotonic() - started, 2)
    verdict = proposal.verdict
    result.stage = verdict.stage if verdict else None
    if proposal.error or verdict is None:
        result.reason = f"no verdict: {proposal.error or proposal.stop_reason}"
    elif not proposal.admitted:
        result.reason = f"rejected at {verdict.stage}: {verdict.reason}"
    else:
        result.kept, result.reason = True, f"admitted ({verdict.reason})"
    return result


async def replay_authorings(
    task_dirs: Sequence[Path],
    *,
    pool_dir: Path,
    store_path: Path,
    out_dir: Path,
    backend: str = "podman",
    served: ServedProposer | None = None,
    form: FileForm = "file_blocks",
    concurrency: int = 1,
    on_done: Callable[[AuthoringResult], None] | None = None,
) -> list[AuthoringResult]:
    """Replay many tasks' authoring, `concurrency` at a time; results in the order given."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(task_dir: Path) -> AuthoringResult:
        async with gate:
            result = await replay_authoring(
                task_dir,
                pool_dir=pool_dir,
                store_path=store_path,
                out_dir=out_dir,
                backend=backend,
                served=served,
                form=form,
            )
        if on_done is not None:
            on_done(result)
        return result

    return list(await asyncio.gather(*(one(Path(t)) for t in task_dirs)))
