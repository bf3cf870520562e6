"""The rollout store's records: attempts and steps, and what its queries return.

The models are the one declaration: the tables' columns, rows and dataset features derive from
them (`ATTEMPTS`, `STEPS`; see columns.py).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from .columns import Table

Role = Literal["solver", "proposer"]
Outcome = Literal["solved", "failed", "timeout", "error"]
FAILED_OUTCOMES: tuple[Outcome, ...] = ("failed", "timeout", "error")


class RolloutStoreError(RuntimeError):
    """A rollout store operation could not be carried out."""


class AttemptNotFoundError(RolloutStoreError, KeyError):
    """No attempt has this id."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "attempt not found"


def now_utc() -> datetime:
    return datetime.now(UTC)


def new_attempt_id() -> str:
    return uuid.uuid4().hex


def stable_attempt_id(*parts: object) -> str:
    """An attempt id derived from what identifies it (run, round, role, task, sample number...).

    A run that resumes after a crash computes the same id again, so its writes stay idempotent.
    """
    key = "\x1f".join(str(part) for part in parts)
    return hashlib.sha256(key.encode()).hexdigest()[:32]


class Attempt(BaseModel):
    """One solver or proposer attempt at one task."""

    id: str = Field(
        default_factory=new_attempt_id, description="Caller-chosen key; see stable_attempt_id."
    )
    run_id: str = ""
    round: int = 0
    role: Role = "solver"
    task_id: str
    category: str = ""
    policy_version: str = ""
    reward: float | None = None
    outcome: Outcome | None = Field(default=None, description="None while the attempt is running.")
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    duration_sec: float | None = None
    error: str | None = None
    started_at: datetime = Field(default_factory=now_utc)
    finished_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Step(BaseModel):
    """One turn of an attempt: what the model said and the tool call it made."""

    attempt_id: str = ""
    index: int
    message: str | None = Field(default=None, description="The model's text for this turn.")
    tool_name: str | None = None
    tool_args: dict[str, Any] | None = None
    tool_output: str | None = Field(default=None, description="Capped head + tail with a marker.")
    output_bytes: int | None = Field(
        default=None, description="Full size of the tool output in bytes, before any cap."
    )
    exit_code: int | None = None
    duration_sec: float | None = None

    @property
    def truncated(self) -> bool:
        stored = len((self.tool_output or "").encode())
        return self.output_bytes is not None and self.output_bytes > stored


class Trajectory(BaseModel):
    attempt: Attempt
    steps: list[Step]


class PassRate(BaseModel):
    key: str = Field(description="Task id or category.")
    policy_version: str
    attempts: int = Field(description="Finished attempts.")
    solved: int
    errors: int = Field(description="Attempts that ended in an infrastructure error.")
    pass_rate: float | None = Field(
        description="solved / (attempts - errors); None when no scored attempt."
    )
    mean_reward: float | None


class Failure(BaseModel):
    """A failed, timed-out or errored attempt with the last error output it produced."""

    attempt_id: str
    run_id: str
    round: int
    role: Role
    task_id: str
    category: str
    policy_version: str
    outcome: Outcome
    reward: float | None
    turns: int
    started_at: datetime
    error: str | None = Field(description="The attempt's error text (tail).")
    last_error_output: str | None = Field(
        description="Output (tail) of the last step with a non-zero exit code, else of the last step."
    )
    last_error_step: int | None


class SearchHit(BaseModel):
    attempt_id: str
    task_id: str
    role: Role
    outcome: Outcome | None
    kind: Literal["tool_output", "error"]
    step_index: int | None
    snippet: str


class StoreSummary(BaseModel):
    path: str
    schema_version: int
    attempts: int
    running: int
    steps: int
    by_role: dict[str, int]
    by_outcome: dict[str, int]
    runs: int
    tasks: int
    policy_versions: list[str]
    mean_reward: float | None
    prompt_tokens: int
    completion_tokens: int
    cost: float
    first_started_at: datetime | None
    last_started_at: datetime | None


# The models are the declaration; column lists, rows and dataset features derive from them.
ATTEMPTS = Table("attempts", Attempt)
STEPS = Table("steps", Step, renames={"index": "idx"})  # INDEX is an SQL keyword
