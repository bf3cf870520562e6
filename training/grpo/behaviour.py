"""Learning measured by behaviour: did the update make what it rewarded more likely?

`param_change_l2` (training/trl_worker.py) says how far the weights moved, which under Adam is
about the learning rate times the square root of the parameter count whatever the gradient was:
a diagnostic, not a measure of learning. This module measures the policy instead, inside the
trainer's process, with the trainer's own model (no extra serving):

- every rollout of an optimizer step: the mean log-probability of its completion tokens (the
  policy's own tokens; tool output is masked as in TRL's loss), scored once before the step (in
  `compute_loss`, before TRL's forward: the weights the rollouts were sampled from) and once
  after it (`on_step_end`, after the optimizer step), split by the sign of TRL's advantage:
  rewarded (> 0) and penalised (< 0). Learning is rewarded up, penalised down;
- a fixed probe set (`PROBES`: terminal tasks like the pool's, each with one fixed reply,
  rendered as the job's episodes are) scored with the whole next-token distribution at the job's
  start and end: the mean per-token KL(end || start), the distance to the previous checkpoint.
  Zero when the update changed nothing, however far Adam says the weights went.

Log-probabilities are at the sampling temperature, as TRL scores them in the loss. The cost is
one forward pass without gradient per rollout before and after each step, and two over the probe
set (`TrainHyperParams.measure_behaviour=False` turns it off). Steps trained before a resume are
not measured. Under several ranks each scores its own rollouts and the sums are gathered.

The hook is a subclass of the trainer (`measured`): `compute_loss` is the override point
transformers' Trainer documents; the batch keys read (prompt/completion ids and masks,
advantages, tool_mask) are GRPOTrainer's, and tests/test_behaviour.py fails when they change.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from ..backend import Behaviour, BehaviourStep, LogpShift
from .episode_env import episode_prompt, prompt_tools

#: The probe set: fixed, so that the KL of every job and round compares like with like.
PROBES: tuple[dict[str, str], ...] = (
    {
        "instruction": "Create the file /app/hello.txt containing the word hello.",
        "command": "echo hello > /app/hello.txt",
    },
    {
        "instruction": "Count the lines of /app/data.csv and write the number to /app/count.txt.",
        "command": "wc -l < /app/data.csv > /app/count.txt",
    },
    {
        "instruction": "Write the names of the files in /app, sorted, into /app/files.txt.",
        "command": "ls /app | sort > /app/files.txt",
    },
    {
        "instruction": "Write the sum of the numbers in /app/numbers.txt into /app/sum.txt.",
        "reply": "I will add the numbers with awk and write the total to /app/sum.txt.",
    },
)


def _logits_kwargs(model: Any, keep: int) -> dict[str, Any]:
    """`logits_to_keep` where the model takes it: the logits of the last `keep` positions only,
    not the whole (sequence x vocabulary) matrix of a long prompt."""
    inner = getattr(model, "module", model)  # a DDP wrapper
    if hasattr(inner, "get_base_model"):  # peft
        inner = inner.get_base_model()
    params = inspect.signature(inner.forward).parameters
    return {"logits_to_keep": keep} if "logits_to_keep" in params else {}


def next_token_logits(model: Any, ids: Any, attention: Any, count: int) -> Any:
    """Float32 logits predicting the last `count` tokens of `ids` (1, L): shape (1, count, V)."""
    out = model(
        input_ids=ids, attention_mask=attention, use_cache=False, **_logits_kwargs(model, count + 1)
    )
    return out.logits[:, :-1, :][:, -count:, :].float()


def completion_logps(model: Any, inputs: dict[str, Any], temperature: float) -> tuple[Any, Any]:
    """Per-token log-probabilities of a TRL batch's completions (B, T) and the mask of the
    policy's own tokens, one row at a time (the memory of one sequence's logits)."""
    import torch

    prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
    completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
    mask = completion_mask * inputs["tool_mask"] if "tool_mask" in inputs else completion_mask
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attention = torch.cat([prompt_mask, completion_mask], dim=1)
    keep = completion_ids.size(1)
    rows = []
    with torch.no_grad():
        for i in range(ids.size(0)):
            logits = next_token_logits(model, ids[i : i + 1], attention[i : i + 1], keep)
            logps = (logits / temperature).log_softmax(-1)
            rows.append(logps.gather(-1, completion_ids[i : i + 1, :, None]).squeeze(-1))
    return torch.cat(rows).cpu(), mask.detach().float().cpu()


@dataclass
class _Sums:
    """Token-weighted sums of one class of completions (rewarded or penalised)."""

    before: float = 0.0
    after: float = 0.0
    tokens: int = 0
    completions: int = 0

    def add(self, other: _Sums) -> None:
        self.before += other.before
        self.after += other.after
        self.tokens += other.tokens
        self.completions += other.completions

    def shift(self) -> LogpShift | None:
        if not self.tokens:
            return None
        return LogpShift(
            before=self.before / self.tokens,
            after=self.after / self.tokens,
            tokens=self.tokens,
            completions=self.completions,
        )


@dataclass
class _Pass:
    inputs: dict[str, Any]
    before: Any  # (B, T) log-probabilities before the step
    mask: Any  # (B, T) the policy's own tokens
    advantages: Any  # (B,)


@dataclass
class BehaviourRecorder:
    """Collects one job's measurements; `report()` is the `Behaviour` of the result."""

    temperature: float
    pending: list[_Pass] = field(default_factory=list)
    steps: list[BehaviourStep] = field(default_factory=list)
    totals: dict[str, _Sums] = field(
        default_factory=lambda: {"rewarded": _Sums(), "penalised": _Sums()}
    )
    probe: list[tuple[Any, Any, int]] = field(default_factory=list)  # (ids, attention, count)
    probe_start: list[Any] = field(default_factory=list)  # log-distributions at the start
    probe_kl: float | None = None

    # -- rollouts, step by step
    def before_step(self, model: Any, inputs: dict[str, Any]) -> None:
        keys = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "tool_mask")
        kept = {k: inputs[k].detach() for k in keys if k in inputs}
        before, mask = completion_logps(model, kept, self.temperature)
        advantages = inputs["advantages"].detach().float().cpu()
        if advantages.dim() > 1:  # per-token advantages (TRL subclasses): their first token
            advantages = advantages[:, 0]
        self.pending.append(_Pass(kept, before, mask, advantages))

    def after_step(self, model: Any, step: int, accelerator: Any = None) -> BehaviourStep:
        sums = {"rewarded": _Sums(), "penalised": _Sums()}
        for batch in self.pending:
            after, _ = completion_logps(model, batch.inputs, self.temperature)
            for row in range(after.size(0)):
                sign = float(batch.advantages[row])
                if sign == 0:
                    continue  # no gradient: a group without variance, or an unscored episode
                mask = batch.mask[row]
                part = sums["rewarded" if sign > 0 else "penalised"]
                part.before += float((batch.before[row] * mask).sum())
                part.after += float((after[row] * mask).sum())
                part.tokens += int(mask.sum())
                part.completions += 1
        self.pending.clear()
        if accelerator is not None and accelerator.num_processes > 1:
            from accelerate.utils import gather_object

            gathered = gather_object([sums])  # every rank's share of the step
            sums = {"rewarded": _Sums(), "penalised": _Sums()}
            for rank_sums in gathered:
                for name, part in rank_sums.items():
                    sums[name].add(part)
        for name, part in sums.items():
            self.totals[name].add(part)
        record = BehaviourStep(
            step=step, rewarded=sums["rewarded"].shift(), penalised=sums["penalised"].shift()
        )
        self.steps.append(record)
        return record

    # -- the probe set, at the job's start and end
    def start_probe(self, model: Any, tokenizer: Any, system_prompt: str | None) -> None:
        self.probe = probe_inputs(tokenizer, system_prompt, model_device(model))
        self.probe_start = [self._probe_logdist(model, p) for p in self.probe]

    def end_probe(self, model: Any) -> float | None:
        if not self.probe:
            return None
        total, count = 0.0, 0
        for p, start in zip(self.probe, self.probe_start, strict=True):
            end = self._probe_logdist(model, p)
            # KL(end || start) at each position, over the whole vocabulary.
            total += float((end.exp() * (end - start)).sum())
            count += end.size(0)
        self.probe_kl = max(0.0, total / count)  # float dust below 0 at no change
        return self.probe_kl

    def _probe_logdist(self, model: Any, probe: tuple[Any, Any, int]) -> Any:
        import torch

        ids, attention, count = probe
        with torch.no_grad():
            logits = next_token_logits(model, ids, attention, count)
        return (logits[0] / self.temperature).log_softmax(-1).cpu()

    def report(self) -> Behaviour:
        return Behaviour(
            steps=self.steps,
            rewarded=self.totals["rewarded"].shift(),
            penalised=self.totals["penalised"].shift(),
            probe_kl=self.probe_kl,
            probe_tokens=sum(count for _, _, count in self.probe),
            temperature=self.temperature,
        )


def model_device(model: Any) -> Any:
    return next(model.parameters()).device


def probe_inputs(
    tokenizer: Any, system_prompt: str | None, device: Any
) -> list[tuple[Any, Any, int]]:
    """Each probe as (ids (1, L), attention (1, L), reply tokens): the episode's first prompt
    with the terminal's tools, as GRPOTrainer renders it, then the fixed reply."""
    import torch

    tools = prompt_tools()
    out = []
    for probe in PROBES:
        messages = episode_prompt(probe["instruction"], system_prompt)
        prompt = tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, tokenize=False
        )
        reply = _reply_message(probe)
        full = tokenizer.apply_chat_template([*messages, reply], tools=tools, tokenize=False)
        # The reply as the template renders it after the generation prompt; a template that
        # re-renders earlier turns differently falls back to the reply's plain text.
        completion = full[len(prompt) :] if full.startswith(prompt) else _plain(probe)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        reply_ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([prompt_ids + reply_ids], device=device)
        out.append((ids, torch.ones_like(ids), len(reply_ids)))
    return out


def _reply_message(probe: dict[str, str]) -> dict[str, Any]:
    if "command" not in probe:
        return {"role": "assistant", "content": probe["reply"]}
    call = {"name": "run", "arguments": {"command": probe["command"]}}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": call}],
    }


def _plain(probe: dict[str, str]) -> str:
    return probe.get("reply") or probe["command"]


def measured(trainer_type: type) -> type:
    """`trainer_type` (GRPOTrainer or a subclass) that feeds a `BehaviourRecorder` passed as
    `behaviour=`: before each training pass's loss, and after each optimizer step."""
    from transformers import TrainerCallback

    class AfterStep(TrainerCallback):
        def __init__(self, trainer: Any) -> None:
            self.trainer = trainer

        def on_step_end(self, args, state, control, **kwargs):
            trainer = self.trainer
            trainer.behaviour.after_step(
                trainer.model_wrapped, state.global_step, trainer.accelerator
            )

    class Measured(trainer_type):
        def __init__(self, *args: Any, behaviour: BehaviourRecorder, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.behaviour = behaviour
            self.add_callback(AfterStep(self))

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if model.training:  # a training pass, not an evaluation
                self.behaviour.before_step(model, inputs)
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    Measured.__name__ = Measured.__qualname__ = f"Measured{trainer_type.__name__}"
    return Measured
