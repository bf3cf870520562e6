"""The SFT worker's account of where its time went (training/sft/step_timing.py): each training
step's seconds and tokens go to the role its rows' lengths name, padding and prompt tokens apart."""

from __future__ import annotations

import time
from typing import Any

import pytest

torch = pytest.importorskip("torch")
datasets = pytest.importorskip("datasets")

from autoenvscaling.training.sft.step_timing import UNKNOWN, StepTimer, lengths_by_role  # noqa: E402


class Trainer:
    """The one attribute StepTimer wraps: a training step that takes time by its tokens."""

    def training_step(self, model: Any, inputs: dict[str, Any], *args: Any) -> float:
        time.sleep(0.01 * int(inputs["attention_mask"].sum()))
        return 0.0


def _batch(lengths: list[int], loss_tokens: list[int]) -> dict[str, Any]:
    width = max(lengths)
    mask = torch.tensor([[1] * n + [0] * (width - n) for n in lengths])
    labels = torch.full((len(lengths), width), -100)
    for row, (n, trained) in enumerate(zip(lengths, loss_tokens, strict=True)):
        labels[row, n - trained : n] = 1
    return {"input_ids": torch.zeros_like(mask), "attention_mask": mask, "labels": labels}


def test_each_step_goes_to_the_role_its_lengths_name() -> None:
    prepared = datasets.Dataset.from_dict(
        {
            "input_ids": [[0] * 7, [0] * 35, [0] * 9, [0] * 12, [0] * 12],
            "role": ["solver", "proposer", "solver", "solver", "proposer"],
        }
    )
    roles = lengths_by_role(prepared)
    assert roles == {7: "solver", 35: "proposer", 9: "solver", 12: UNKNOWN}

    trainer = Trainer()
    timer = StepTimer(trainer, roles)
    trainer.training_step(None, _batch([35], [20]))
    trainer.training_step(None, _batch([7, 9], [3, 4]))  # padded to 9: padding is no token
    trainer.training_step(None, _batch([12], [5]))
    summary = timer.summary()

    assert summary["step_calls"] == 3
    assert summary["tokens_by_role"] == {"proposer": 35, "solver": 16, UNKNOWN: 12}
    assert summary["loss_tokens_by_role"] == {"proposer": 20, "solver": 7, UNKNOWN: 5}
    seconds = summary["step_seconds_by_role"]
    assert seconds["proposer"] > seconds["solver"] > 0  # a step costs by its tokens
    assert summary["tokens_per_second"] > 0


def test_a_dataset_without_roles_maps_nothing() -> None:
    assert lengths_by_role(datasets.Dataset.from_dict({"input_ids": [[1, 2]]})) == {}
