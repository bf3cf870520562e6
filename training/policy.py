"""The shared policy: what a checkpoint is, how clients name it, and who serves it.

Both roles (proposer and solver) talk to one OpenAI-compatible endpoint. After training, a
`PolicyServer` makes the new checkpoint the served model and returns the `PolicyRef` that the
flywheel state stores; every later client call uses `ref.model` against `ref.base_url`.
This module is import-light on purpose: the graph process imports it, and must never pull torch.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

CheckpointKind = Literal["lora", "full"]


def _now() -> datetime:
    return datetime.now(UTC)


class Checkpoint(BaseModel):
    """One published policy checkpoint (a folder the registry owns)."""

    id: str = Field(
        description="Registry id, unique; also used as the served model / adapter name."
    )
    path: Path = Field(
        description="Folder holding the weights (a PEFT adapter or a full HF model)."
    )
    parent_id: str | None = Field(default=None, description="Checkpoint this one was trained from.")
    base_model: str = Field(description="Base model name or path the weights apply to.")
    kind: CheckpointKind = Field(
        description="'lora' = PEFT adapter over base_model; 'full' = full weights."
    )
    job_id: str | None = Field(default=None, description="Training job that produced it.")
    metrics: dict[str, Any] = Field(
        default_factory=dict, description="Training metrics of that job."
    )
    created_at: datetime = Field(default_factory=_now)


class PolicyRef(BaseModel):
    """How a client reaches the current policy: pass `model` as `model=` to `base_url`."""

    model: str = Field(description="Name clients pass as `model=` (a LoRA name or the base model).")
    base_url: str = Field(description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1.")
    checkpoint_id: str | None = Field(default=None, description="None = the untrained base model.")
    served_from: str = Field(
        default="",
        description="What serves it, e.g. 'vllm:lora', 'vllm:reload', 'vllm:restart', 'llama.cpp:lora'.",
    )

    @property
    def chat_model(self) -> str:
        """The "provider:model" string a LangChain client is built from (OpenAI-compatible)."""
        return f"openai:{self.model}"


@runtime_checkable
class PolicyServer(Protocol):
    """Makes a published checkpoint the model both roles use."""

    async def activate(self, checkpoint: Checkpoint) -> PolicyRef:
        """Serve `checkpoint`; return the ref both roles use from now on.

        Raises `PolicySwapError` when every swap path failed; the previous policy then stays served.
        """
        ...

    def current(self) -> PolicyRef:
        """The ref of the model served now."""
        ...


class PolicySwapError(RuntimeError):
    """A checkpoint could not be made the served policy; the previous one is still served."""
