"""How many proposer episodes the proposer update cut to its completion length, and how much of
the model's own writing that left untrained: counted by the worker (training/proposer/worker.py),
carried in the round's training summary, shown in the round report."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field


class EpisodeCut(BaseModel):
    """What the completion length left of one recorded episode."""

    truncated: bool
    model_tokens: int = Field(ge=0, description="The model's own tokens in the whole episode.")
    model_tokens_cut: int = Field(ge=0, description="Of those, past the cut: never trained.")

    @classmethod
    def of(cls, env_mask: list[int], limit: int) -> EpisodeCut:
        """From an episode's mask (1 on the model's tokens) and the completion length."""
        return cls(
            truncated=len(env_mask) > limit,
            model_tokens=sum(env_mask),
            model_tokens_cut=sum(env_mask[limit:]),
        )


class CompletionTruncation(BaseModel):
    """One proposer update's episodes, counted once each however often TRL served them."""

    max_completion_tokens: int
    episodes: int = 0
    truncated: int = Field(default=0, description="Episodes longer than max_completion_tokens.")
    model_tokens: int = 0
    model_tokens_cut: int = Field(default=0, description="The model's tokens left untrained.")

    @classmethod
    def of(cls, cuts: Iterable[EpisodeCut], limit: int) -> CompletionTruncation:
        cuts = list(cuts)
        return cls(
            max_completion_tokens=limit,
            episodes=len(cuts),
            truncated=sum(c.truncated for c in cuts),
            model_tokens=sum(c.model_tokens for c in cuts),
            model_tokens_cut=sum(c.model_tokens_cut for c in cuts),
        )

    @classmethod
    def from_training(cls, training: dict[str, Any]) -> CompletionTruncation | None:
        """From a round's training summary (None when no proposer update ran)."""
        proposer = training.get("proposer")
        found = proposer.get("truncation") if isinstance(proposer, dict) else None
        return cls.model_validate(found) if isinstance(found, dict) else None

    def shown(self) -> str:
        share = f" ({self.model_tokens_cut / self.model_tokens:.0%})" if self.model_tokens else ""
        return (
            f"{self.truncated} of {self.episodes} episode(s) cut to {self.max_completion_tokens} "
            f"completion tokens; {self.model_tokens_cut} of the model's {self.model_tokens} "
            f"tokens{share} untrained"
        )
