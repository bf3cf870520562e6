"""The GRPO trainer process: `python -m autoenvscaling.training.grpo.worker JOB.json`.

Runs TRL's GRPOTrainer on the job's Harbor tasks with multi-turn episodes in live sandboxes
(`environment_factory` -> `TaskEpisode`); the reward is each task's own verifier. Writes the new
weights and `result.json` into the job's work_dir; it never touches the checkpoint registry (the
parent process publishes, so a crash here cannot leave a half checkpoint anywhere that matters).

The job, the progress events on stdout, the result file and the process boundary (`serve_job`)
follow training/worker_protocol.py, which the parent imports too. torch and TRL are imported
inside the functions that use them, so importing this module is cheap.

Under `accelerate launch` each rank runs its share of a step's rollouts in its own sandboxes (the
step's rollouts are divided by the number of ranks, so the step's batch is the job's, whatever the
number of processes); the verified episodes are gathered in TRL's group order, so every rank's
group counts and records are the whole step's and rank 0's result has every episode.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...tools.settings import get_settings
from ...tools.tasks.format import load_task
from ...tools.trials.verifier import shared_verifier_risk
from ..backend import TrainHyperParams, TrainJob
from ..policy_loading import load_policy
from ..trl_adapter import score_labelled_positions_only
from ..trl_worker import (
    RL_LR_SCHEDULE,
    save_weights,
    start_job,
    train,
    trl_config,
)
from ..worker_protocol import (
    WORKER_ENV,
    WorkerResult,
    emit,
    process_rank,
    serve_job,
    step_progress,
)
from .behaviour import BehaviourRecorder, measured
from .desktop_episode import EPISODES, episode_kind
from .episode_env import EpisodeConfig, EventLoop, TaskEpisode, episode_prompt, prompt_tools
from .heap import trim_heap_between_passes
from .sandboxes import task_starter
from .trl_backend import plan_steps

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


def step_plan(job: TrainJob) -> list[list[str]]:
    """The tasks of each step (trl_grpo.plan_steps: admitted first, replay fills the rest)."""
    hyper = job.hyper
    return plan_steps(
        _trainable(job, job.task_dirs),
        _trainable(job, job.replay_task_dirs),
        steps=hyper.steps,
        tasks_per_step=hyper.tasks_per_step,
        seed=hyper.seed,
        priority=job.replay_priority,
    )


def _trainable(job: TrainJob, paths: list[Path]) -> list[Path]:
    """The tasks whose reward a policy cannot forge by design: a shared-verifier task with a
    root agent enters a job only when the user opts in (Settings.train_shared_verifier)."""
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
    `tasks_per_step` rows a step, so step i trains on exactly plan[i]. `environment` routes the
    row to its episode (TRL's dict environment_factory): a computer-use task's has the served
    desktop tools, every other task's the terminal alone (training/grpo/desktop_episode.py)."""
    plan = step_plan(job)
    if not any(plan):
        raise ValueError("the job has no tasks (task_dirs and replay_task_dirs are empty)")
    tasks = {t: load_task(Path(t)) for t in dict.fromkeys(t for step in plan for t in step)}
    return [
        {
            "prompt": episode_prompt(tasks[t].instruction, job.system_prompt),
            "task_dir": t,
            "task_name": tasks[t].name,
            "environment": episode_kind(t),
        }
        for step in plan
        for t in step
    ]


def build_dataset(job: TrainJob):
    from datasets import Dataset

    return Dataset.from_list(dataset_rows(job))


def longest_prompt_tokens(
    tokenizer, prompts: list[list[dict[str, str]]], environments: list[str] | None = None
) -> int:
    """The longest first prompt of the job, as GRPOTrainer renders it: each with the tools of
    its row's episode (`environments`, the rows' `environment`; the terminal's when None)."""
    longest = 0
    kinds = environments or ["terminal"] * len(prompts)
    for prompt, kind in zip(prompts, kinds, strict=True):
        rendered = tokenizer.apply_chat_template(
            prompt,
            tools=prompt_tools(EPISODES[kind]),
            add_generation_prompt=True,
            tokenize=True,
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


def make_reward_func(loop, stats: GroupStats, records: list[dict[str, Any]], job_id: str):
    """The GRPO reward: every rollout's verifier, run concurrently once the batch is generated.

    An episode that was not scored (its sandbox or the engine failed, or its task's verifier
    gave no valid reward: tools/trials/faults.py) gets None. TRL 1.16's GRPOTrainer documents
    None as "no reward" for a sample: it becomes NaN, is left out of the group's nanmean and
    nanstd, and its advantage is set to 0, so it neither scores nor moves its group's baseline.
    (Its tokens still count in the loss's normaliser and, with beta > 0, in the KL term.)"""

    def verifier_reward(prompts, completions, environments=None, log_metric=None, **_: Any):
        if environments is None:
            raise RuntimeError("verifier_reward needs environment_factory episodes")

        async def all_finished():
            return await asyncio.gather(*(env._finish() for env in environments))

        done = loop.run(all_finished())
        local_rewards = [record.reward for record in done]
        step_records = [record.model_dump() for record in done]
        rank, ranks = process_rank()
        if ranks > 1:
            from accelerate.utils import gather_object

            # Rank order is TRL's order too (it gathers the rewards so): groups stay consecutive.
            step_records = gather_object([{**r, "rank": rank} for r in step_records])
        rewards = [r["reward"] for r in step_records]
        records.extend(step_records)
        dropped = stats.add(rewards)
        infrastructure = sum(1 for r in step_records if r["fault"] == "infrastructure")
        task_fault = sum(1 for r in step_records if r["fault"] == "task")
        if log_metric is not None:
            log_metric("groups_no_variance", float(dropped))
            calls = sum(r["tool_calls"] for r in step_records)
            log_metric("tool_calls_mean", calls / max(len(step_records), 1))
            log_metric("episodes_infrastructure", float(infrastructure))
            log_metric("episodes_task_fault", float(task_fault))
        scored = len(rewards) - infrastructure - task_fault
        if rank != 0:
            return local_rewards  # rank 0 reports the whole step's episodes
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
        return local_rewards

    return verifier_reward


def _steps_of(records: list[dict[str, Any]], per_step: int) -> list[list[str]]:
    """The distinct tasks of each step, read from the verified episodes (in generation order)."""
    return [
        list(dict.fromkeys(r["task_dir"] for r in records[i : i + per_step]))
        for i in range(0, len(records), per_step)
    ]


def run(job: TrainJob) -> WorkerResult:
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import EnvironmentFactory, GRPOTrainer

    started = time.monotonic()
    hyper = job.hyper
    score_labelled_positions_only()  # CPU: TRL's LM head scores only completion tokens (as on CUDA)
    device = start_job(job, GRPOConfig)
    model, tokenizer, peft_config, kind, new_base = load_policy(job, device)
    plan = step_plan(job)
    dataset = build_dataset(job)
    tasks_per_step = max(len(step) for step in plan)
    longest = longest_prompt_tokens(tokenizer, dataset["prompt"], dataset["environment"])
    episode = trained_episode(hyper, longest)
    emit("load", job.job_id, message=f"episode: {episode}")

    loop = EventLoop()
    episode_config = EpisodeConfig(
        command_timeout_sec=hyper.command_timeout_sec, tool_output_chars=hyper.tool_output_chars
    )
    start = task_starter(job.sandbox_backend, job.sandbox_options)
    stats = GroupStats(hyper.num_generations)
    records: list[dict[str, Any]] = []

    def factory(kind: type[TaskEpisode]) -> Callable[[], TaskEpisode]:
        return lambda: kind(loop, start, episode_config)

    # One factory per kind of episode the job's rows name (each row's `environment`): TRL shows a
    # row only its own episode's tools, so a terminal task's prompt is the terminal's alone.
    factories: dict[str, EnvironmentFactory] = {
        str(name): factory(EPISODES[str(name)]) for name in dict.fromkeys(dataset["environment"])
    }

    # One optimizer step per generation batch, its gradient accumulated over passes of per_pass;
    # with several ranks each generates and trains on its share of the step's rollouts.
    rollouts, ranks = hyper.num_generations * tasks_per_step, process_rank()[1]
    if rollouts % ranks:
        raise ValueError(
            f"a step's {rollouts} rollouts (num_generations x tasks_per_step) do not divide "
            f"among {ranks} processes"
        )
    per_pass, passes = hyper.passes(rollouts // ranks)
    config = trl_config(
        GRPOConfig,
        job,
        device,
        per_device_train_batch_size=per_pass,
        gradient_accumulation_steps=passes,
        num_generations=hyper.num_generations,
        max_completion_length=episode["max_completion_length"],
        max_tool_calling_iterations=episode["max_tool_calling_iterations"],
        generation_kwargs=hyper.generation_kwargs(),
        temperature=hyper.temperature,
        beta=hyper.beta,
        use_vllm=hyper.use_vllm,
        vllm_mode=hyper.vllm_mode,
        vllm_server_base_url=hyper.vllm_server_base_url,
        vllm_gpu_memory_utilization=hyper.vllm_gpu_memory_utilization,
        shuffle_dataset=False,  # the step plan's order is the training order
        # A round's job is a few steps of one online run: TRL's default linear decay to 0 inside
        # each job spent a round's later steps at a fraction of the rate (1e-4 -> 1.25e-5 over 8
        # steps, measured) and started again the next round.
        lr_scheduler_type=RL_LR_SCHEDULE,
    )

    behaviour = BehaviourRecorder(temperature=hyper.temperature)
    # Any: the measured subclass takes `behaviour=` on top of GRPOTrainer's own arguments.
    trainer_type: Any = measured(GRPOTrainer) if hyper.measure_behaviour else GRPOTrainer
    trainer = trainer_type(
        **({"behaviour": behaviour} if hyper.measure_behaviour else {}),
        model=model,
        reward_funcs=[make_reward_func(loop, stats, records, job.job_id)],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        environment_factory=factories,
        callbacks=[
            c for c in (step_progress(job.job_id, hyper.steps), trim_heap_between_passes()) if c
        ],
    )
    # Read back what TRL will generate with (transformers backend): the served reply cap or not.
    generation = getattr(trainer, "generation_config", None)
    episode["trl_max_new_tokens"] = getattr(generation, "max_new_tokens", None)
    if hyper.measure_behaviour:  # the policy the job starts from: the previous checkpoint
        behaviour.start_probe(trainer.model, tokenizer, job.system_prompt)
    trained = train(trainer, job)
    loop.stop()
    if hyper.measure_behaviour:
        behaviour.end_probe(trainer.model_wrapped)

    metrics: dict[str, Any] = {
        **trained,
        "reward_mean": (sum(stats.rewards) / len(stats.rewards)) if stats.rewards else None,
        "episodes": len(records),
        "episodes_scored": len(stats.rewards),
        # Not scored, never aborting the job (tools/trials/faults.py): counted, with why.
        **dropped_episodes(records),
        "device": device,
        "episode": episode,
        "duration_sec": round(time.monotonic() - started, 2),
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
        behaviour=behaviour.report() if hyper.measure_behaviour else None,
    )
    # A resumed job's earlier steps (before the kill) are not in `stats`: it always saves.
    no_variance = stats.groups_no_variance == stats.groups_total
    if no_variance and not trained["resumed_from"]:
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
    return save_weights(trainer, tokenizer, job, result)


def main(argv: list[str] | None = None) -> int:
    return serve_job("grpo.worker", TrainJob, run, argv)


if __name__ == "__main__":
    sys.exit(main())
