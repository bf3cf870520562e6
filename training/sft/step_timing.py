"""Where an SFT job's time goes: seconds and tokens per role, measured step by step.

The trainer shuffles the rows it is given, so a step's role is not known from its index; it is
known from its rows' lengths (a tokenized example's length names the examples it can be, and a
solver episode, ~0.7k tokens, is never a proposer's, ~3.5k). `StepTimer` wraps the trainer's
`training_step` (forward and backward, the step's cost) and records each call's seconds and
tokens; `summary` gives the per-role totals the cold start's card reports. Worker-side only.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

UNKNOWN = "unknown"


def lengths_by_role(dataset: Any) -> dict[int, str]:
    """Tokenized length -> role, from the trainer's prepared dataset (`input_ids`, `role`); a
    length two roles share maps to UNKNOWN."""
    if "input_ids" not in dataset.column_names or "role" not in dataset.column_names:
        return {}
    found: dict[int, str] = {}
    for ids, role in zip(dataset["input_ids"], dataset["role"], strict=True):
        length = len(ids)
        found[length] = role if found.get(length, role) == role else UNKNOWN
    return found


class StepTimer:
    """Times `trainer.training_step` and attributes each call to its rows' roles."""

    def __init__(self, trainer: Any, roles: dict[int, str]) -> None:
        self.roles = roles
        self.seconds: dict[str, float] = defaultdict(float)
        self.tokens: dict[str, int] = defaultdict(int)
        self.loss_tokens: dict[str, int] = defaultdict(int)
        self.calls = 0
        inner = trainer.training_step

        def timed(model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            out = inner(model, inputs, *args, **kwargs)
            self._record(inputs, time.monotonic() - started)
            return out

        trainer.training_step = timed

    def _record(self, inputs: dict[str, Any], seconds: float) -> None:
        self.calls += 1
        mask = inputs.get("attention_mask")
        lengths = (
            [int(n) for n in mask.sum(dim=-1).tolist()]
            if mask is not None
            else [int(inputs["input_ids"].shape[-1])] * int(inputs["input_ids"].shape[0])
        )
        labels = inputs.get("labels")
        trained = (
            [int(n) for n in (labels != -100).sum(dim=-1).tolist()]
            if labels is not None
            else lengths
        )
        total = sum(lengths) or 1
        for length, loss_tokens in zip(lengths, trained, strict=True):
            role = self.roles.get(length, UNKNOWN)
            self.seconds[role] += seconds * length / total  # a mixed step: by its tokens
            self.tokens[role] += length
            self.loss_tokens[role] += loss_tokens

    def summary(self) -> dict[str, Any]:
        """Per role: seconds in forward+backward, tokens seen, tokens with a loss; and the rate."""
        seconds = sum(self.seconds.values())
        tokens = sum(self.tokens.values())
        return {
            "step_seconds_by_role": {k: round(v, 1) for k, v in self.seconds.items()},
            "tokens_by_role": dict(self.tokens),
            "loss_tokens_by_role": dict(self.loss_tokens),
            "step_calls": self.calls,
            "tokens_per_second": round(tokens / seconds, 1) if seconds else None,
        }
