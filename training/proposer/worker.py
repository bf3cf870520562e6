"""The proposer GRPO process: `python -m autoenvscaling.training.proposer.worker JOB.json`.

TRL's GRPOTrainer with a `rollout_func` that returns the recorded proposer conversations instead
of generating: each dataset row is one group's prompt; TRL repeats it `num_generations` times and
the function hands back that group's proposals in order, tokenized with the policy's chat template,
with `env_mask` = 1 on the model's own tokens and 0 on tool results, revision prompts and template
scaffolding. The reward function returns each proposal's recorded gate reward. Weights and
`result.json` go to the job's work_dir; the parent publishes (training/proposer/update.py).

On-policy by construction (the parent starts the job from the checkpoint that sampled the
episodes and plans only that policy's attempts): one generation holds every group
(`ProposerJob.schedule`), logprobs are taken at the sampling temperature, and a step after the
first is clipped against the logprobs the starting weights gave at the generation (TRL's
`num_iterations` / `steps_per_generation` machinery). The recorded episodes carry no sampler
logprobs: TRL uses a sampler's logprobs only with vLLM, so the gap between the server's
weights (the embedded preset's quantized GGUF) and these stays uncorrected.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from ...tools.report.truncation import CompletionTruncation, EpisodeCut
from ..grpo.behaviour import BehaviourRecorder, measured
from ..policy_loading import load_policy
from ..trl_adapter import score_labelled_positions_only
from ..trl_worker import (
    RL_LR_SCHEDULE,
    save_weights,
    start_job,
    train,
    trl_config,
)
from ..worker_protocol import WorkerResult, emit, serve_job, step_progress
from .update import ProposerJob, prompt_key


class TemplateError(ValueError):
    """The chat template does not render a conversation as a growing prefix; cannot mask it."""


def tokenize_conversation(
    tokenizer, messages: list[dict[str, Any]], tools: list[dict[str, Any]], n_prompt: int
) -> tuple[list[int], list[int], list[int]]:
    """(prompt_ids, completion_ids, env_mask) of a recorded conversation.

    The prompt is messages[:n_prompt] plus the assistant header; the completion is everything
    after it; env_mask marks the tokens the model produced (its replies through end-of-turn).
    """

    def render(upto: int, generation: bool) -> str:
        return tokenizer.apply_chat_template(
            messages[:upto], tools=tools or None, tokenize=False, add_generation_prompt=generation
        )

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    previous = render(n_prompt, True)
    prompt_ids = ids(previous)
    completion: list[int] = []
    mask: list[int] = []

    def add(text: str, trained: int) -> None:
        if text:
            piece = ids(text)
            completion.extend(piece)
            mask.extend([trained] * len(piece))

    i = n_prompt
    eos = tokenizer.eos_token
    while i < len(messages):
        if messages[i]["role"] == "assistant":
            upto, generation = i + 1, False
        else:  # a run of tool results / user prompts, then the next assistant header
            upto = i
            while upto < len(messages) and messages[upto]["role"] != "assistant":
                upto += 1
            generation = upto < len(messages)
        full = render(upto, generation)
        if not full.startswith(previous):
            raise TemplateError(
                "the chat template re-renders earlier turns when a message is added; "
                "the conversation cannot be split into prompt and masked completion"
            )
        piece = full[len(previous) :]
        if messages[i]["role"] == "assistant":
            end = piece.rfind(eos) + len(eos) if eos and eos in piece else len(piece)
            add(piece[:end], 1)  # the reply and its end-of-turn token: the model's own
            add(piece[end:], 0)
        else:
            add(piece, 0)
        previous, i = full, upto
    return prompt_ids, completion, mask


def run(job: ProposerJob) -> WorkerResult:
    from datasets import Dataset
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    started = time.monotonic()
    hyper = job.hyper
    score_labelled_positions_only()  # CPU: the LM head scores only completion tokens
    device = start_job(job, GRPOConfig)
    model, tokenizer, peft_config, kind, new_base = load_policy(job, device)

    groups = {g.key: g for g in job.groups}
    cursors: dict[str, int] = {key: 0 for key in groups}
    used: list[dict[str, Any]] = []
    cuts: dict[str, EpisodeCut] = {}  # per episode: a generation served again counts once

    # Every episode tokenized once, up front: the completion length is known before TRL's
    # config is (by default the longest episode, so the trainer sees whole episodes).
    encoded = {
        sample.attempt_id: tokenize_conversation(tokenizer, sample.messages, g.tools, len(g.prompt))
        for g in job.groups
        for sample in g.samples
    }
    limit = job.max_completion_tokens or max(len(mask) for _, _, mask in encoded.values())

    def recorded_rollouts(prompts: list[list[dict[str, Any]]], trainer: Any) -> dict[str, Any]:
        out: dict[str, list[Any]] = {
            "prompt_ids": [],
            "completion_ids": [],
            "env_mask": [],
            "recorded_reward": [],
        }
        for prompt in prompts:
            # The prompt row carries no tools column; find its group by the prompt alone.
            group = next(g for g in groups.values() if prompt_key(prompt, g.tools) == g.key)
            sample = group.samples[cursors[group.key] % len(group.samples)]
            cursors[group.key] += 1
            p_ids, c_ids, mask = encoded[sample.attempt_id]
            cuts[sample.attempt_id] = cut = EpisodeCut.of(mask, limit)
            if cut.truncated:
                c_ids, mask = c_ids[:limit], mask[:limit]
            out["prompt_ids"].append(p_ids)
            out["completion_ids"].append(c_ids)
            out["env_mask"].append(mask)
            out["recorded_reward"].append(sample.reward)
            used.append({"attempt_id": sample.attempt_id, "reward": sample.reward})
        return {**out, "logprobs": None}

    def gate_reward(prompts, completions, recorded_reward=None, **_: Any) -> list[float | None]:
        if recorded_reward is None:
            raise RuntimeError("the rollout function returned no recorded rewards")
        emit("rewards", job.job_id, metrics={"rewards": list(recorded_reward)})
        return [float(r) for r in recorded_reward]

    dataset = Dataset.from_list([{"prompt": g.prompt} for g in job.groups])
    schedule = job.schedule()
    # An optimizer step's proposals, their gradient accumulated over passes of per_pass: a
    # proposal is a long sequence (the brief is thousands of tokens), one at a time by default.
    per_pass, passes = hyper.passes(job.group_size * schedule.groups_per_step)
    config = trl_config(
        GRPOConfig,
        job,
        device,
        per_device_train_batch_size=per_pass,
        gradient_accumulation_steps=passes,
        # One generation = every group, each episode once; later steps reuse it, clipped.
        # (TRL counts passes here: the generation spans `steps_per_generation` optimizer steps.)
        steps_per_generation=passes * schedule.steps_per_generation,
        num_iterations=schedule.num_iterations,
        num_generations=job.group_size,
        temperature=job.temperature,  # the sampler's: logprobs under the sampling distribution
        max_completion_length=limit,
        scale_rewards="batch",  # per-role normalisation: this batch holds proposer groups only
        # A recorded episode ends on a tool result, not on EOS: that is not a truncation.
        mask_truncated_completions=False,
        beta=hyper.beta,
        lr_scheduler_type=RL_LR_SCHEDULE,  # as the solver's GRPO (training/trl_worker.py)
    )

    # What the update did to behaviour, as the solver's step reports it (training/grpo/
    # behaviour.py): rewarded and penalised episodes' log-probability before -> after each step
    # (TRL's env_mask is its tool_mask: the model's own tokens only), and the probe set's KL.
    behaviour = BehaviourRecorder(temperature=job.temperature)
    # Any: the measured subclass takes `behaviour=` on top of GRPOTrainer's own arguments.
    trainer_type: Any = measured(GRPOTrainer) if hyper.measure_behaviour else GRPOTrainer
    trainer = trainer_type(
        **({"behaviour": behaviour} if hyper.measure_behaviour else {}),
        model=model,
        reward_funcs=[gate_reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        # TRL hands conversational prompts (message lists); its RolloutFunc alias says list[str]
        # (unchecked here: the measured subclass is typed Any).
        rollout_func=recorded_rollouts,
        callbacks=[step_progress(job.job_id, hyper.steps)],
    )
    if hyper.measure_behaviour:  # the policy the update starts from
        behaviour.start_probe(trainer.model, tokenizer, None)
    trained = train(trainer, job)
    if hyper.measure_behaviour:
        behaviour.end_probe(trainer.model_wrapped)
    result = WorkerResult(
        job_id=job.job_id,
        kind=kind,
        base_model=new_base,
        metrics={
            **trained,
            "role": "proposer",
            "groups": len(job.groups),
            "group_size": job.group_size,
            "truncation": CompletionTruncation.of(cuts.values(), limit).model_dump(),
            "temperature": job.temperature,
            "schedule": schedule.model_dump(),
            "device": device,
            "duration_sec": round(time.monotonic() - started, 2),
        },
        steps_done=trainer.state.global_step,
        groups_total=len(job.groups),
        episodes=used,
        behaviour=behaviour.report() if hyper.measure_behaviour else None,
    )
    return save_weights(trainer, tokenizer, job, result)


def main(argv: list[str] | None = None) -> int:
    return serve_job("proposer.worker", ProposerJob, run, argv)


if __name__ == "__main__":
    sys.exit(main())
