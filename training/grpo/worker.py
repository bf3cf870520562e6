"""The GRPO trainer process: `python -m autoenvscaling.training.grpo.worker JOB.json`.

Runs TRL's GRPOTrainer on the job's Harbor tasks with multi-turn episodes in live sandboxes
(`environment_factory` -> `TaskEpisode`); the reward is each task's own verifier. Writes the new
weights and `result.json` into the job's work_dir; it never touches the checkpoint registry (the
parent process publishes, so a crash here cannot leave a half checkpoint anywhere that matters).

The job, the progress events on stdout, the result file and the process boundary (`serve_job`)
follow training/worker_protocol.py, which the parent imports too. torch and TRL are imported
inside the functions that use them, so importing this module is cheap.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from autoenvscaling.training.backend import TrainHyperParams, TrainJob
from autoenvscaling.training.worker_protocol import (
    WEIGHTS_DIR,
    WORKER_ENV,
    WorkerResult,
    emit,
    serve_job,
    step_progress,
)

for _key, _value in WORKER_ENV.items():
    os.environ.setdefault(_key, _value)  # before transformers/trl are imported (lazily, below)


class GroupStats:
    """Counts GRPO groups (num_generations consecutive rollouts of one task) and their variance.

    A None reward is an episode that was not scored (tools/trials/faults.py): it is left out of
    its group, as TRL leaves it out of the group's mean and std; a group with fewer than two
    scored episodes has no variance to learn from."""

    def __init__(self, group_size: int) -> None:
        self.group_size = group_size
        self.groups_total = 0
        self.groups_no_variance = 0
        self.rewards: list[float] = []

    def add(self, rewards: list[float | None]) -> int:
        """Record one batch; returns how many of its groups had no variance."""
        dropped = 0
        for start in range(0, len(rewards), self.group_size):
            group = [r for r in rewards[start : start + self.group_size] if r is not None]
            self.groups_total += 1
            if len(group) < 2 or max(group) - min(group) < 1e-9:
                dropped += 1
            self.rewards.extend(group)
        self.groups_no_variance += dropped
        return dropped


def dropped_episodes(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What the result and the round report say about episodes that were not scored: how many
    by fault (infrastructure, the task's) and the most common reasons."""
    from collections import Counter

    faults = [r for r in records if r.get("fault")]
    reasons = Counter(f"{r['fault']}: {Path(r['task_dir']).name}: {r['error']}" for r in faults)
    counts: dict[str, Any] = {
        "episodes_infrastructure": sum(1 for r in faults if r["fault"] == "infrastructure"),
        "episodes_task_fault": sum(1 for r in faults if r["fault"] == "task"),
    }
    if reasons:
        counts["episodes_not_scored_reasons"] = "; ".join(
            f"{n}x {reason[:300]}" for reason, n in reasons.most_common(3)
        )
    return counts


def start_job(job: TrainJob) -> tuple[Path, str]:
    """What every worker does first: its work folder, torch's threads, the device, the `load`
    event. Returns (work folder, device)."""
    import torch

    work = Path(job.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    if job.hyper.torch_threads:
        torch.set_num_threads(job.hyper.torch_threads)
    device = _device(job)
    message = f"loading {job.base_model} on {device}"
    emit("load", job.job_id, total=job.hyper.steps, message=message)
    return work, device


def _device(job: TrainJob) -> str:
    import torch

    if job.hyper.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if job.hyper.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' was asked for but torch sees no CUDA device")
    return job.hyper.device


def ensure_tool_template(tokenizer) -> str | None:
    """Make the chat template one TRL can render tools with and parse tool calls from.

    A known tool-capable template is kept. A ChatML tokenizer whose template has no tool support
    (SmolLM2, the embedded default) gets TRL's Qwen2.5 template, which is ChatML plus the
    `<tool_call>` JSON format. Returns a note when the template was replaced.
    """
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    from autoenvscaling.training.chat_format import CHATML_TOKENS, END_OF_TURN, tool_chat_template

    if tokenizer.chat_template and supports_tool_calling(tokenizer):
        try:
            add_response_schema(tokenizer)
            return None
        except ValueError:
            pass  # tool-capable but unknown to TRL's parsers: fall through
    vocab = tokenizer.get_vocab()
    if all(token in vocab for token in CHATML_TOKENS):
        # The policy's chat format, the one its server renders with (training/chat_format.py).
        tokenizer.chat_template = tool_chat_template()
        tokenizer.eos_token = END_OF_TURN  # ChatML turns end here; generation must stop here
        add_response_schema(tokenizer)
        return (
            "the model's chat template has no tool calling TRL can parse; using TRL's "
            "Qwen2.5 ChatML template (tool calls as <tool_call> JSON)"
        )
    raise ValueError(
        "the base model's chat template supports no tool calling TRL can parse and "
        "the tokenizer is not ChatML: give the model a tool-capable chat template"
    )


def load_policy(job: TrainJob, device: str):
    """(model, tokenizer, peft_config, kind, base_of_new_checkpoint) for this job."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hyper, parent = job.hyper, job.parent
    model_path = (
        str(parent.path) if parent is not None and parent.kind == "full" else job.base_model
    )
    # bf16 weights only for a frozen LoRA base; trained weights stay fp32 (bf16 autocast computes)
    # because an Adam step of ~lr is below bf16's resolution and would be rounded away.
    dtype = torch.bfloat16 if device == "cuda" and hyper.lora else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.padding_side = "left"
    note = ensure_tool_template(tokenizer)
    if note:
        emit("load", job.job_id, message=note)
    if tokenizer.pad_token is None:
        vocab = tokenizer.get_vocab()
        tokenizer.pad_token = "<|endoftext|>" if "<|endoftext|>" in vocab else tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    peft_config = None
    if parent is not None and parent.kind == "lora":
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(parent.path), is_trainable=hyper.lora)
        if not hyper.lora:  # full fine-tuning continues from the merged weights
            model = model.merge_and_unload()
            model.requires_grad_(True)  # peft froze the base weights when it loaded the adapter
    elif hyper.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=hyper.lora_rank,
            lora_alpha=hyper.lora_alpha,
            lora_dropout=0.0,
            target_modules=hyper.lora_target_modules,
            task_type="CAUSAL_LM",
        )
    kind = "lora" if hyper.lora else "full"
    return model, tokenizer, peft_config, kind, model_path


def step_plan(job: TrainJob) -> list[list[str]]:
    """The tasks of each step (trl_grpo.plan_steps: admitted first, replay fills the rest)."""
    from autoenvscaling.training.grpo.trl_backend import plan_steps

    hyper = job.hyper
    return plan_steps(
        _trainable(job, job.task_dirs),
        _trainable(job, job.replay_task_dirs),
        steps=hyper.steps,
        tasks_per_step=hyper.tasks_per_step,
        seed=hyper.seed,
    )


def _trainable(job: TrainJob, paths: list[Path]) -> list[Path]:
    """The tasks whose reward a policy cannot forge by design: a shared-verifier task with a
    root agent enters a job only when the user opts in (Settings.train_shared_verifier)."""
    from autoenvscaling.tools.settings import get_settings
    from autoenvscaling.tools.trials.verifier import shared_verifier_risk

    kept = []
    for path in (Path(p).resolve() for p in paths):
        risk = None if get_settings().train_shared_verifier else shared_verifier_risk(path)
        if risk is None:
            kept.append(path)
            continue
        emit(
            "tasks",
            job.job_id,
            message=f"{path.name} left out of training: {risk} "
            "(AUTOENVSCALING_TRAIN_SHARED_VERIFIER=1 trains on it anyway)",
        )
    return kept


def dataset_rows(job: TrainJob) -> list[dict[str, Any]]:
    """One row per planned (step, task) slot, in step order: the trainer reads them unshuffled,
    `tasks_per_step` rows a step, so step i trains on exactly plan[i]."""
    from autoenvscaling.tools.tasks.format import load_task
    from autoenvscaling.training.grpo.episode_env import episode_prompt

    plan = step_plan(job)
    if not any(plan):
        raise ValueError("the job has no tasks (task_dirs and replay_task_dirs are empty)")
    tasks = {t: load_task(Path(t)) for t in dict.fromkeys(t for step in plan for t in step)}
    return [
        {
            "prompt": episode_prompt(tasks[t].instruction, job.system_prompt),
            "task_dir": t,
            "task_name": tasks[t].name,
        }
        for step in plan
        for t in step
    ]


def build_dataset(job: TrainJob):
    from datasets import Dataset

    return Dataset.from_list(dataset_rows(job))


def longest_prompt_tokens(tokenizer, prompts: list[list[dict[str, str]]]) -> int:
    """The longest first prompt of the job, as GRPOTrainer renders it (tools included)."""
    from autoenvscaling.training.grpo.episode_env import prompt_tools

    longest = 0
    for prompt in prompts:
        rendered = tokenizer.apply_chat_template(
            prompt, tools=prompt_tools(), add_generation_prompt=True, tokenize=True
        )
        ids = rendered["input_ids"] if hasattr(rendered, "keys") else rendered
        longest = max(longest, len(ids))
    return longest


def trained_episode(hyper: TrainHyperParams, prompt_tokens: int) -> dict[str, Any]:
    """What TRL is given for one episode, from the served episode's budgets (recorded in the
    result's metrics, so the round report shows what training really ran)."""
    return {
        "max_completion_length": hyper.episode_tokens(prompt_tokens),
        "max_tool_calling_iterations": hyper.max_turns,
        **hyper.generation_kwargs(),
        "temperature": hyper.temperature,
        "context_window": hyper.context_window,
        "longest_prompt_tokens": prompt_tokens,
        "tool_output_chars": hyper.tool_output_chars,
    }


def _trainable_snapshot(model) -> dict[str, Any]:
    return {
        n: p.detach().to("cpu", copy=True) for n, p in model.named_parameters() if p.requires_grad
    }


def _change_norm(model, before: dict[str, Any]) -> float:
    total = 0.0
    for name, param in model.named_parameters():
        if name in before:
            total += float((param.detach().to("cpu").float() - before[name].float()).pow(2).sum())
    return math.sqrt(total)


def make_reward_func(loop, stats: GroupStats, records: list[dict[str, Any]], job_id: str):
    """The GRPO reward: every rollout's verifier, run concurrently once the batch is generated.

    An episode that was not scored (its sandbox or the engine failed, or its task's verifier
    gave no valid reward: tools/trials/faults.py) gets None. TRL 1.16's GRPOTrainer documents
    None as "no reward" for a sample: it becomes NaN, is left out of the group's nanmean and
    nanstd, and its advantage is set to 0, so it neither scores nor moves its group's baseline.
    (Its tokens still count in the loss's normaliser and, with beta > 0, in the KL term.)"""
    import asyncio

    def verifier_reward(prompts, completions, environments=None, log_metric=None, **_: Any):
        if environments is None:
            raise RuntimeError("verifier_reward needs environment_factory episodes")

        async def all_finished():
            return await asyncio.gather(*(env._finish() for env in environments))

        done = loop.run(all_finished())
        rewards = [record.reward for record in done]
        records.extend(record.model_dump() for record in done)
        dropped = stats.add(rewards)
        infrastructure = sum(1 for r in done if r.fault == "infrastructure")
        task_fault = sum(1 for r in done if r.fault == "task")
        if log_metric is not None:
            log_metric("groups_no_variance", float(dropped))
            log_metric("tool_calls_mean", sum(r.tool_calls for r in done) / max(len(done), 1))
            log_metric("episodes_infrastructure", float(infrastructure))
            log_metric("episodes_task_fault", float(task_fault))
        scored = len(rewards) - infrastructure - task_fault
        emit(
            "rewards",
            job_id,
            message=f"{len(rewards)} episodes, {scored} verified"
            + (f", {len(rewards) - scored} not scored" if scored < len(rewards) else ""),
            metrics={
                "rewards": rewards,
                "groups_no_variance": dropped,
                "episodes_infrastructure": infrastructure,
                "episodes_task_fault": task_fault,
            },
        )
        return rewards

    return verifier_reward


def _steps_of(records: list[dict[str, Any]], per_step: int) -> list[list[str]]:
    """The distinct tasks of each step, read from the verified episodes (in generation order)."""
    return [
        list(dict.fromkeys(r["task_dir"] for r in records[i : i + per_step]))
        for i in range(0, len(records), per_step)
    ]


def run(job: TrainJob) -> WorkerResult:
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    from autoenvscaling.training.grpo.episode_env import EpisodeConfig, EventLoop, TaskEpisode
    from autoenvscaling.training.trl_adapter import score_labelled_positions_only
    from autoenvscaling.training.grpo.heap import trim_heap_between_passes
    from autoenvscaling.training.grpo.sandboxes import task_starter

    started = time.monotonic()
    hyper = job.hyper
    score_labelled_positions_only()  # CPU: TRL's LM head scores only completion tokens (as on CUDA)
    work, device = start_job(job)
    model, tokenizer, peft_config, kind, new_base = load_policy(job, device)
    plan = step_plan(job)
    dataset = build_dataset(job)
    tasks_per_step = max(len(step) for step in plan)
    episode = trained_episode(hyper, longest_prompt_tokens(tokenizer, dataset["prompt"]))
    emit("load", job.job_id, message=f"episode: {episode}")

    loop = EventLoop()
    episode_config = EpisodeConfig(
        command_timeout_sec=hyper.command_timeout_sec, tool_output_chars=hyper.tool_output_chars
    )
    start = task_starter(job.sandbox_backend, job.sandbox_options)
    stats = GroupStats(hyper.num_generations)
    records: list[dict[str, Any]] = []

    def factory() -> TaskEpisode:
        return TaskEpisode(loop, start, episode_config)

    cuda = device == "cuda"
    # One optimizer step per generation batch, its gradient accumulated over passes of per_pass.
    per_pass, passes = hyper.passes(hyper.num_generations * tasks_per_step)
    config = GRPOConfig(
        output_dir=str(work / "trainer"),
        max_steps=hyper.steps,
        learning_rate=hyper.learning_rate,
        per_device_train_batch_size=per_pass,
        gradient_accumulation_steps=passes,
        num_generations=hyper.num_generations,
        max_completion_length=episode["max_completion_length"],
        max_tool_calling_iterations=episode["max_tool_calling_iterations"],
        generation_kwargs=hyper.generation_kwargs(),
        temperature=hyper.temperature,
        beta=hyper.beta,
        seed=hyper.seed,
        use_cpu=not cuda,
        bf16=cuda,
        gradient_checkpointing=hyper.gradient_checkpointing,
        use_vllm=hyper.use_vllm,
        vllm_mode=hyper.vllm_mode,
        vllm_server_base_url=hyper.vllm_server_base_url,
        vllm_gpu_memory_utilization=hyper.vllm_gpu_memory_utilization,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        shuffle_dataset=False,  # the step plan's order is the training order
    )

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[make_reward_func(loop, stats, records, job.job_id)],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        environment_factory=factory,
        callbacks=[
            c for c in (step_progress(job.job_id, hyper.steps), trim_heap_between_passes()) if c
        ],
    )
    # Read back what TRL will generate with (transformers backend): the served reply cap or not.
    generation = getattr(trainer, "generation_config", None)
    episode["trl_max_new_tokens"] = getattr(generation, "max_new_tokens", None)
    before = _trainable_snapshot(trainer.model)
    output = trainer.train()
    change = _change_norm(trainer.model, before)
    loop.stop()

    history = [h for h in trainer.state.log_history if "loss" in h or "reward" in h]
    metrics: dict[str, Any] = {
        "train_loss": output.training_loss,
        "param_change_l2": change,
        "reward_mean": (sum(stats.rewards) / len(stats.rewards)) if stats.rewards else None,
        "episodes": len(records),
        "episodes_scored": len(stats.rewards),
        # Not scored, never aborting the job (tools/trials/faults.py): counted, with why.
        **dropped_episodes(records),
        "device": device,
        "episode": episode,
        "duration_sec": round(time.monotonic() - started, 2),
        "log_history": history,
    }
    result = WorkerResult(
        job_id=job.job_id,
        kind=kind,
        base_model=new_base,
        metrics=metrics,
        steps_done=trainer.state.global_step,
        groups_total=stats.groups_total,
        groups_dropped_no_variance=stats.groups_no_variance,
        episodes=records,
        step_tasks=_steps_of(records, hyper.num_generations * tasks_per_step) or plan,
    )
    if stats.groups_total == 0 or stats.groups_no_variance == stats.groups_total:
        result.reason = (
            f"no reward variance in any of {stats.groups_total} groups "
            "(every scored rollout of each task scored the same): nothing to learn, "
            "the policy is unchanged"
        )
        lost = len(records) - len(stats.rewards)
        if lost:
            result.reason += (
                f"; {lost} of {len(records)} episodes were not scored "
                f"({metrics['episodes_infrastructure']} infrastructure, "
                f"{metrics['episodes_task_fault']} the task's fault)"
            )
        return result
    emit("save", job.job_id, step=result.steps_done, total=hyper.steps, message="saving weights")
    weights = work / WEIGHTS_DIR
    # A PreTrainedModel or PeftModel here; transformers types Trainer.model as any nn.Module.
    trainer.model.save_pretrained(str(weights))  # pyright: ignore[reportOptionalMemberAccess, reportCallIssue]
    if kind == "full":
        tokenizer.save_pretrained(str(weights))
    result.weights_dir = str(weights)
    return result


def main(argv: list[str] | None = None) -> int:
    return serve_job("grpo.worker", TrainJob, run, argv)


if __name__ == "__main__":
    sys.exit(main())
