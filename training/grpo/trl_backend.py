"""The TRL GRPO backend: training/grpo/worker.py in a worker process (training/worker_backend.py),
on the tasks `plan_steps` assigns to each optimizer step."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..worker_backend import WorkerBackend


def plan_steps(
    admitted: Sequence[Path | str],
    replay: Sequence[Path | str],
    *,
    steps: int,
    tasks_per_step: int,
    seed: int = 0,
    priority: Mapping[str, float] | None = None,
) -> list[list[str]]:
    """Which tasks each GRPO step trains on: the round's admitted tasks first, replay fills the rest.

    The rule (the run report prints the plan it produced):
    1. The `steps x tasks_per_step` slots are filled in step order.
    2. Every admitted task takes one slot before any replay task does, in the given order; when
       there are more admitted tasks than slots, the later ones are not trained on this round.
    3. Replay tasks fill the remaining slots from a shuffle seeded by `seed` (the round), so
       successive rounds rotate through the pool; with `priority` (a task folder's name -> the
       chance a group of it has reward variance), the shuffled tasks are then taken highest
       priority first (the shuffle breaks ties): a group whose rollouts all score alike has no
       advantage and teaches nothing.
    4. Slots still free after every task had one cycle through the same order again (admitted
       tasks first).
    5. A step holds a task at most once while it has other tasks left to choose from.
    """
    first = list(dict.fromkeys(str(Path(p)) for p in admitted))
    rest = [t for t in dict.fromkeys(str(Path(p)) for p in replay) if t not in first]
    random.Random(seed).shuffle(rest)
    if priority:
        rest.sort(key=lambda t: -priority.get(Path(t).name, 0.0))  # stable: ties stay shuffled
    order = first + rest
    slots = steps * tasks_per_step
    queue = [order[i % len(order)] for i in range(slots)] if order else []
    plan: list[list[str]] = []
    pending = queue[:slots]
    for _ in range(steps):
        step: list[str] = []
        while pending and len(step) < tasks_per_step:
            # Prefer the first task this step does not hold yet (rule 5), else the next one.
            pick = next((i for i, t in enumerate(pending) if t not in step), 0)
            step.append(pending.pop(pick))
        plan.append(step)
    return plan


class TRLGRPOBackend(WorkerBackend):
    """TRL's GRPOTrainer on live task episodes (training/grpo/worker.py)."""

    worker_module = "autoenvscaling.training.grpo.worker"
    worker_name = "GRPO worker"
