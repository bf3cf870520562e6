"""MCP rollout reader: read-only tools over the rollout store, sized for a model's context.

Summaries come first (counts, pass rates, failures with the tail of their last error); a
trajectory is paged and its step outputs are excerpts. `rollout://{attempt_id}` serves the same
first page as a resource. An error names the database as `<store>` (and its folder as
`<store folder>`), never by its path on this machine.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from typing import Literal, TypeVar

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from ..tools.rollouts.models import (
    Attempt,
    Failure,
    Outcome,
    PassRate,
    Role,
    RolloutStoreError,
    SearchHit,
    StoreSummary,
)
from ..tools.rollouts.store import RolloutStore
from ..tools.text_cap import cap_text
from .host_paths import scrubber

T = TypeVar("T")
READ_ONLY = ToolAnnotations(
    readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
)
MAX_ROWS = 200
#: Largest offset or step index accepted: far past any store, and within SQLite's 64-bit range.
MAX_INDEX = 1_000_000_000


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(int(value), high))


class AttemptBrief(BaseModel):
    id: str
    task_id: str
    category: str
    role: Role
    policy_version: str
    outcome: Outcome | None
    reward: float | None
    turns: int
    duration_sec: float | None
    started_at: datetime
    error: str | None = Field(description="First characters of the error, if any.")

    @classmethod
    def of(cls, attempt: Attempt, error_chars: int = 300) -> AttemptBrief:
        return cls(
            **attempt.model_dump(include=set(cls.model_fields) - {"error"}),
            error=cap_text(attempt.error, error_chars).text if attempt.error else None,
        )


class AttemptList(BaseModel):
    attempts: list[AttemptBrief]
    has_more: bool


class PassRateTable(BaseModel):
    by: Literal["task", "category"]
    rows: list[PassRate]
    total_rows: int
    truncated: bool


class FailureList(BaseModel):
    failures: list[Failure]


class SearchResults(BaseModel):
    query: str
    hits: list[SearchHit]


class StepView(BaseModel):
    index: int
    message: str | None
    tool_name: str | None
    tool_args: dict | None
    tool_output: str | None = Field(description="Excerpt (head + tail) of the stored output.")
    output_bytes: int | None
    exit_code: int | None
    duration_sec: float | None


class TrajectoryPage(BaseModel):
    attempt: Attempt
    total_steps: int
    steps: list[StepView]
    next_start_step: int | None = Field(description="Pass as start_step for the next page.")


def build_rollouts_server(
    store: RolloutStore | str | os.PathLike[str], *, name: str = "rollouts"
) -> FastMCP:
    """A reader over `store` (an open store, or a database path opened read-only on first use)."""
    opened: list[RolloutStore] = [store] if isinstance(store, RolloutStore) else []
    path = None if isinstance(store, RolloutStore) else store
    where = store.location if isinstance(store, RolloutStore) else os.fspath(store)
    places = {where: "<store>"}
    if not isinstance(store, RolloutStore) or not store.postgres:
        places[os.path.dirname(os.path.abspath(where))] = "<store folder>"
    scrub = scrubber(places)

    def get_store() -> RolloutStore:
        if not opened:
            assert path is not None  # an open store was put in `opened` above
            try:
                opened.append(RolloutStore(path, read_only=True))
            except RolloutStoreError as exc:
                raise RolloutStoreError(f"{exc} (no rollouts were recorded yet?)") from exc
        return opened[0]

    async def call(fn: Callable[..., T], *args: object) -> T:
        try:
            return await anyio.to_thread.run_sync(fn, *args)
        except OSError as exc:  # str(exc) would name a file by its host path
            raise ToolError(exc.strerror or type(exc).__name__) from None
        except Exception as exc:  # noqa: BLE001 - reported to the client without host paths
            raise ToolError(scrub(str(exc))) from None

    server = FastMCP(
        name,
        # INFO would log every request (and set the root logger's level in embedding apps).
        log_level="WARNING",
        instructions=(
            "Read past solver and proposer attempts: start with rollout_summary, pass_rates or "
            "recent_failures; open one attempt with get_trajectory; search_rollouts finds text in "
            "tool outputs and errors."
        ),
    )

    @server.tool(annotations=READ_ONLY)
    async def rollout_summary() -> StoreSummary:
        """Counts of attempts and steps by role and outcome, runs, tasks, policy versions, cost."""
        return await call(lambda: get_store().summary())

    @server.tool(annotations=READ_ONLY)
    async def pass_rates(
        by: Literal["task", "category"] = "task",
        policy_version: str | None = None,
        role: Role = "solver",
        limit: int = 50,
    ) -> PassRateTable:
        """Pass rate and mean reward per task (or category) and policy version, lowest first.

        Infrastructure errors are counted but excluded from the rate.
        """
        rows = await call(lambda: get_store().pass_rates(by, policy_version, role))
        rows.sort(key=lambda r: (r.pass_rate is None, r.pass_rate or 0.0, r.key))
        limit = _clamp(limit, 1, MAX_ROWS)
        return PassRateTable(
            by=by, rows=rows[:limit], total_rows=len(rows), truncated=len(rows) > limit
        )

    @server.tool(annotations=READ_ONLY)
    async def recent_failures(
        limit: int = 10, role: Role | None = "solver", output_chars: int = 1000
    ) -> FailureList:
        """Newest failed, timed-out or errored attempts with the tail of their last error output."""
        limit, output_chars = _clamp(limit, 1, 50), _clamp(output_chars, 100, 8000)
        failures = await call(
            lambda: get_store().recent_failures(limit, role, output_chars=output_chars)
        )
        return FailureList(failures=failures)

    @server.tool(annotations=READ_ONLY)
    async def list_attempts(
        task_id: str | None = None,
        outcome: Literal["solved", "failed", "timeout", "error", "running"] | None = None,
        role: Role | None = None,
        policy_version: str | None = None,
        run_id: str | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> AttemptList:
        """Attempts matching every given filter, newest first (one line each)."""
        limit = _clamp(limit, 1, MAX_ROWS)
        offset = _clamp(offset, 0, MAX_INDEX)
        attempts = await call(
            lambda: get_store().list_attempts(
                role=role,
                task_id=task_id,
                outcome=outcome,
                policy_version=policy_version,
                run_id=run_id,
                limit=limit + 1,
                offset=offset,
            )
        )
        return AttemptList(
            attempts=[AttemptBrief.of(a) for a in attempts[:limit]], has_more=len(attempts) > limit
        )

    def page(attempt_id: str, start_step: int, max_steps: int, output_chars: int) -> TrajectoryPage:
        trajectory = get_store().trajectory(attempt_id)
        attempt = trajectory.attempt
        if attempt.error:
            attempt = attempt.model_copy(update={"error": cap_text(attempt.error, 4000).text})
        chosen = trajectory.steps[start_step : start_step + max_steps]
        views = [
            StepView(
                **step.model_dump(exclude={"attempt_id", "tool_output"}),
                tool_output=(
                    cap_text(step.tool_output, output_chars).text
                    if step.tool_output is not None
                    else None
                ),
            )
            for step in chosen
        ]
        end = start_step + len(chosen)
        return TrajectoryPage(
            attempt=attempt,
            total_steps=len(trajectory.steps),
            steps=views,
            next_start_step=end if end < len(trajectory.steps) else None,
        )

    @server.tool(annotations=READ_ONLY)
    async def get_trajectory(
        attempt_id: str, start_step: int = 0, max_steps: int = 20, output_chars: int = 1500
    ) -> TrajectoryPage:
        """One attempt and a page of its steps (model text, tool call, output excerpt, exit code)."""
        max_steps = _clamp(max_steps, 1, 100)
        output_chars = _clamp(output_chars, 200, 16_000)
        return await call(
            page, attempt_id, _clamp(start_step, 0, MAX_INDEX), max_steps, output_chars
        )

    @server.tool(annotations=READ_ONLY)
    async def search_rollouts(text: str, limit: int = 20) -> SearchResults:
        """Full-text search over tool outputs and attempt errors; every word must appear."""
        hits = await call(lambda: get_store().search(text[:1000], _clamp(limit, 1, 100)))
        return SearchResults(query=text, hits=hits)

    @server.resource(
        "rollout://{attempt_id}",
        mime_type="application/json",
        description="One attempt with its first 20 steps (output excerpts).",
    )
    async def rollout(attempt_id: str) -> str:
        return (await call(page, attempt_id, 0, 20, 1500)).model_dump_json(indent=1)

    return server
