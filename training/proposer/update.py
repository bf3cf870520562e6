"""Proposer training: the gate's proposer reward as a GRPO signal, through TRL.

The proposer's rollouts are produced outside the trainer (the flywheel's proposer attempts, each
a whole multi-turn episode with tools and revisions), so the update feeds them to TRL's
GRPOTrainer through `rollout_func` (training/proposer/worker.py): for each brief the trainer asks
for `num_generations` completions and gets the recorded ones, with the tool results and revision
prompts masked out (`env_mask`), and the reward function returns each attempt's recorded gate
reward (+1 admitted, -0.25 failed calibration, -1 failed validation; an autosubmitted or
set-aside reply's as below). TRL computes the group
advantages, the clipped policy loss and the optimizer step; nothing here is a hand-written loop.

This module plans the update (no torch):
- a group = the proposals of the round(s) whose prompt (system prompt + brief + tools) is the
  same, read from their transcripts (tools/rollouts/transcripts.py);
- an infrastructure error (reward None, outcome `error`) never enters a group;
- on-policy only: an attempt sampled by another policy version or another model than the one
  the update starts from (an earlier checkpoint, a `--proposer-model`) never enters a group, and
  every kept attempt was sampled at one temperature, the one the trainer scores logprobs at;
- a reply the proposer set aside (it wrote nothing before the first file, and the prompt was
  served again: graphs/proposer/episode.py) is a sample of its own in its attempt's group: the
  conversation up to where it was served, then the reply, at `SET_ASIDE_REWARD`. What was served
  is what is trained, so the prose the re-asking hides is penalised;
- an autosubmitted proposal (the budget ended with files in the folder; the model never called
  `submit`) is trained at `trained_reward`: the gate's reward less `AUTOSUBMIT_PENALTY`, never
  below -1, so calling `submit` is learnt and not left to the budget;
- a group with fewer than 2 valid proposals, or whose rewards are all equal (zero advantage,
  no gradient), is dropped with the reason;
- GRPO needs one group size per run: groups larger than the smallest kept one keep their first
  proposals (by attempt order), and the plan says how many were left out;
- advantages are normalised per role: the proposer update's batch holds proposer groups only and
  uses TRL's `scale_rewards="batch"` (group-mean baseline, std over the role's batch).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ...tools.gate import REWARD_VALIDATION_FAILED, STAGES
from ...tools.rollouts.store import RolloutStore
from ...tools.rollouts.transcripts import load_transcript, normalized
from ...tools.tasks.task_files import TASK_FILES
from ..backend import TrainJob
from ..worker_backend import WorkerBackend

#: The sampling temperature of an attempt recorded before attempts recorded it (ModelConfig's).
DEFAULT_TEMPERATURE = 0.7

#: A set-aside reply's reward: that of an attempt that ends without a task (-1), fixed. Had the
#: reply been the last one served, the attempt would have ended there with nothing written and
#: nothing submitted; the attempt's final reward belongs to the re-sampled reply that went on,
#: and giving it to the prose too would reward prose whenever the retry succeeded.
SET_ASIDE_REWARD = REWARD_VALIDATION_FAILED

#: What an autosubmitted proposal loses against the same verdict reached by `submit`. 0.25 is
#: the gate's own smallest step (-0.25 failed calibration, -1 failed validation, +1 admitted), so
#: the verdict still dominates: an admitted autosubmission (0.75) beats every rejection.
AUTOSUBMIT_PENALTY = 0.25


#: Which reward the proposer is trained on. "gate": the gate's own (+1 admitted, -0.25 out of
#: the band, -1 any other rejection or nothing submitted). "graded": the same, except that a
#: rejected task earns credit for the stage it reached (`graded_reward`): a submitted task that
#: fails lint beats no task, one that builds and is solved by its oracle beats one that does not
#: parse, so a proposer that never reaches admission still has a gradient.
RewardArm = Literal["gate", "graded"]

#: The stages that check a task works: the gate's, in its order, up to the copy checks. Reaching
#: the k-th (0: lint) and failing it scores -1 + (k + 1) * GRADED_STEP, except lint: a task that
#: fails it earns the step in proportion to the task's five files it wrote (`TASK_FILES`), so
#: an empty folder scores as no task. Failing decontam or dedup (a copy) earns nothing.
WORKING_STAGES: tuple[str, ...] = STAGES[: STAGES.index("decontam")]
GRADED_STEP = 0.1


def graded_reward(
    gate_reward: float, stage: str | None, files_written: int = len(TASK_FILES)
) -> float:
    """The graded arm's reward of a proposal the gate gave `gate_reward`, rejected at `stage`
    (None: admitted, or never submitted), whose folder held `files_written` of the task's five
    files. Admission (+1) and out-of-band (-0.25) keep the gate's reward; below them, -1 + 0.1
    per working stage reached (lint's step scaled by the files written), so every rejection
    stays under the out-of-band one (anti_cheat, the last: -0.4).

    Why lint's step is scaled: measured (benchmarks/RESULTS.md, issue 40), a flat 0.1 for
    reaching lint taught a 135M proposer, in one update, to call `submit` on an empty folder."""
    if gate_reward > REWARD_VALIDATION_FAILED or stage not in WORKING_STAGES:
        return gate_reward
    if stage == "lint":
        share = min(max(files_written, 0), len(TASK_FILES)) / len(TASK_FILES)
        return REWARD_VALIDATION_FAILED + GRADED_STEP * share
    return REWARD_VALIDATION_FAILED + (WORKING_STAGES.index(stage) + 1) * GRADED_STEP


def files_written(metadata: dict[str, Any]) -> int:
    """How many of the task's five files a proposal wrote (attempts recorded before the count
    was: all five, the grade they were trained at)."""
    written = metadata.get("task_files")
    return len(TASK_FILES) if written is None else len(written)


def rejected_at(metadata: dict[str, Any]) -> str | None:
    """The stage a proposal's task was rejected at: the admission's (when the candidate reached
    it) else the proposer's own last gate run's; None when it never reached a gate."""
    stage = metadata.get("admission_stage", metadata.get("stage"))
    return str(stage) if stage else None


def trained_reward(gate_reward: float, autosubmitted: bool, arm: RewardArm = "gate") -> float:
    """The reward a proposal is trained on. An autosubmitted one gets the arm's reward less its
    autosubmission penalty (`autosubmit_penalty`), floored at -1: below it, writing files the
    gate rejects would score under writing nothing at all (-1, never submitted), and the model
    would learn to write nothing."""
    if not autosubmitted:
        return gate_reward
    return max(REWARD_VALIDATION_FAILED, gate_reward - autosubmit_penalty(arm))


def autosubmit_penalty(arm: RewardArm) -> float:
    """The gate arm's AUTOSUBMIT_PENALTY; the graded arm's is half of one task file's credit at
    lint (0.01): 0.25 would floor every autosubmitted rejection before the oracle at -1 and erase
    the grades, and anything above one file's credit (0.02) would score an autosubmitted task of
    one file as no task (measured: a group of empty submissions, prose, and one autosubmitted
    instruction.md was flat). So: no task < any file written, and `submit` beats the budget."""
    return AUTOSUBMIT_PENALTY if arm == "gate" else GRADED_STEP / len(TASK_FILES) / 2


class ProposerSample(BaseModel):
    attempt_id: str
    reward: float = Field(description="What it is trained on (`trained_reward`).")
    autosubmitted: bool = Field(
        default=False, description="Submitted by the budget's end, not by `submit`."
    )
    temperature: float = Field(default=DEFAULT_TEMPERATURE, description="It was sampled at.")
    messages: list[dict[str, Any]] = Field(description="The whole conversation, prompt first.")


class ProposerGroup(BaseModel):
    """Proposals that answered the same prompt: GRPO's unit of comparison."""

    key: str
    prompt: list[dict[str, Any]] = Field(description="The messages before the first reply.")
    tools: list[dict[str, Any]] = Field(default_factory=list)
    samples: list[ProposerSample]

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.samples]


class DroppedGroup(BaseModel):
    key: str
    attempts: list[str]
    rewards: list[float]
    reason: str


class ProposerPlan(BaseModel):
    """What a proposer update trains on, and everything it left out with the reason."""

    groups: list[ProposerGroup] = Field(default_factory=list)
    group_size: int = 0
    dropped: list[DroppedGroup] = Field(default_factory=list)
    excluded: dict[str, str] = Field(
        default_factory=dict, description="attempt id -> why it is in no group"
    )
    trimmed: int = Field(default=0, description="Valid proposals left out to keep one group size.")
    set_aside_samples: int = Field(
        default=0, description="Set-aside replies among the planned samples (before trimming)."
    )
    autosubmitted: int = Field(
        default=0,
        description="Autosubmitted proposals among the planned samples, trained at the gate's "
        "reward less AUTOSUBMIT_PENALTY (before trimming).",
    )
    temperature: float | None = Field(
        default=None, description="The kept proposals' sampling temperature (one per update)."
    )
    arm: RewardArm = Field(default="gate", description="The reward the samples carry.")

    @property
    def reason(self) -> str | None:
        """Why there is nothing to train on (None when there is)."""
        if self.groups:
            return None
        why = "; ".join(f"{d.key[:8]}: {d.reason}" for d in self.dropped) or "no proposer attempts"
        return f"no proposer group with reward variance ({why}): the policy is unchanged"

    def summary(self) -> dict[str, Any]:
        """Compact, for the round report (the plan itself goes next to the training job)."""
        return {
            "groups": len(self.groups),
            "group_size": self.group_size,
            "rewards": [g.rewards for g in self.groups],
            "groups_dropped": [f"{len(d.attempts)} proposals: {d.reason}" for d in self.dropped],
            "excluded": self.excluded,
            "trimmed": self.trimmed,
            "set_aside_samples": self.set_aside_samples,
            "autosubmitted": self.autosubmitted,
            "temperature": self.temperature,
            "reward_arm": self.arm,
        }


def prompt_key(prompt: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    blob = json.dumps({"p": normalized(prompt), "t": tools}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _split_prompt(messages: list[dict[str, Any]]) -> int:
    """Index of the first assistant message: everything before it is the prompt."""
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            return i
    return len(messages)


def _set_aside(
    metadata: dict[str, Any], messages: list[dict[str, Any]], cut: int
) -> list[list[dict[str, Any]]]:
    """Each set-aside reply as the conversation it answered: the served messages before it, then
    the reply (graphs/proposer/record.py records where each was served)."""
    out = []
    for aside in metadata.get("set_aside_replies") or []:
        at = int(aside["at"])
        if not cut <= at <= len(messages):
            raise ValueError(
                f"a set-aside reply recorded at message {at} of a {len(messages)}-message "
                f"transcript whose prompt ends at {cut}: the record and the transcript "
                "disagree, left out"
            )
        out.append([*messages[:at], aside["message"]])
    return out


def plan_proposer_update(
    store_path: Path | str,
    *,
    rounds: list[int] | None = None,
    run_id: str | None = None,
    policy_version: str | None = None,
    model: str | None = None,
    arm: RewardArm = "gate",
) -> ProposerPlan:
    """Group the proposer attempts of `rounds` (all when None) for one GRPO update, each scored
    by the reward `arm` (`RewardArm`).

    `policy_version` / `model`: the policy the update starts from; attempts another policy
    sampled are left out (training on them would be off-policy without a correction)."""
    plan = ProposerPlan(arm=arm)
    members: dict[str, list[ProposerSample]] = defaultdict(list)
    prompts: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    with RolloutStore(store_path, read_only=True) as store:
        for trajectory in store.iter_trajectories(role="proposer"):
            attempt = trajectory.attempt
            if rounds is not None and attempt.round not in rounds:
                continue
            if run_id is not None and attempt.run_id != run_id:
                continue
            if attempt.reward is None or attempt.outcome == "error":
                plan.excluded[attempt.id] = (
                    f"infrastructure error ({attempt.error or 'no reward'}): never in a group"
                )
                continue
            if policy_version is not None and attempt.policy_version != policy_version:
                plan.excluded[attempt.id] = (
                    f"sampled by policy {attempt.policy_version or '?'}, not {policy_version} "
                    "that this update starts from: off-policy, left out"
                )
                continue
            sampler = attempt.metadata.get("model")
            if model is not None and sampler is not None and sampler != model:
                plan.excluded[attempt.id] = (
                    f"written by {sampler}, not by the policy ({model}): left out"
                )
                continue
            transcript = load_transcript(store_path, attempt.id)
            if transcript is None:
                plan.excluded[attempt.id] = "no transcript: the conversation is not known"
                continue
            cut = _split_prompt(transcript.messages)
            if cut == len(transcript.messages):
                plan.excluded[attempt.id] = "the model never replied: nothing to train"
                continue
            recorded = attempt.metadata.get("temperature")
            temperature = DEFAULT_TEMPERATURE if recorded is None else float(recorded)
            if temperature <= 0:
                plan.excluded[attempt.id] = (
                    "sampled greedily (temperature 0): no sampling distribution to train"
                )
                continue
            if plan.temperature is None:
                plan.temperature = temperature
            elif abs(temperature - plan.temperature) > 1e-9:
                plan.excluded[attempt.id] = (
                    f"sampled at temperature {temperature:g}, the update's proposals at "
                    f"{plan.temperature:g}: one temperature per update, left out"
                )
                continue
            try:
                asides = _set_aside(attempt.metadata, transcript.messages, cut)
            except ValueError as exc:
                plan.excluded[attempt.id] = str(exc)
                continue
            autosubmitted = bool(attempt.metadata.get("autosubmitted"))
            reward = float(attempt.reward)
            if arm == "graded":
                meta = attempt.metadata
                reward = graded_reward(reward, rejected_at(meta), files_written(meta))
            prompt = transcript.messages[:cut]
            key = prompt_key(prompt, transcript.tools)
            prompts.setdefault(key, (prompt, transcript.tools))
            members[key].append(
                ProposerSample(
                    attempt_id=attempt.id,
                    reward=trained_reward(reward, autosubmitted, arm),
                    autosubmitted=autosubmitted,
                    temperature=temperature,
                    messages=transcript.messages,
                )
            )
            plan.autosubmitted += autosubmitted
            for n, aside in enumerate(asides):
                members[key].append(
                    ProposerSample(
                        attempt_id=f"{attempt.id}#set-aside-{n + 1}",
                        reward=SET_ASIDE_REWARD,
                        temperature=temperature,
                        messages=aside,
                    )
                )
                plan.set_aside_samples += 1
    candidates: list[ProposerGroup] = []
    for key, samples in members.items():
        rewards = [s.reward for s in samples]
        ids = [s.attempt_id for s in samples]
        if len(samples) < 2:
            reason = (
                "a single valid proposal for this brief: no group to compare within "
                "(proposals share a brief when proposer_group_size >= 2)"
            )
        elif max(rewards) - min(rewards) < 1e-9:
            reason = (
                f"all {len(samples)} proposals scored {rewards[0]:g}: zero advantage, no gradient"
            )
        else:
            prompt, tools = prompts[key]
            candidates.append(ProposerGroup(key=key, prompt=prompt, tools=tools, samples=samples))
            continue
        plan.dropped.append(DroppedGroup(key=key, attempts=ids, rewards=rewards, reason=reason))
    if not candidates:
        return plan
    size = min(len(g.samples) for g in candidates)
    for group in candidates:
        kept = group.samples[:size]
        if max(s.reward for s in kept) - min(s.reward for s in kept) < 1e-9:
            # Trimming to the common size removed its variance: dropped like any flat group.
            plan.dropped.append(
                DroppedGroup(
                    key=group.key,
                    attempts=[s.attempt_id for s in group.samples],
                    rewards=group.rewards,
                    reason=f"its first {size} proposals (the common group size) scored alike",
                )
            )
            continue
        plan.trimmed += len(group.samples) - size
        plan.groups.append(group.model_copy(update={"samples": kept}))
    plan.group_size = size if plan.groups else 0
    return plan


def update_due(round_: int, every: int) -> bool:
    """The proposer updates every `every` rounds (round numbers start at 1); 0 = never."""
    return every > 0 and round_ % every == 0


class ProposerSchedule(BaseModel):
    """How TRL walks the recorded episodes: one generation holds every group, so each episode
    is scored once, by the weights that start the update (the checkpoint that sampled it)."""

    groups_per_step: int = Field(description="Groups in one optimizer step's batch.")
    steps_per_generation: int = Field(description="Optimizer steps that share the generation.")
    num_iterations: int = Field(description="Passes over the generation (TRL's mu).")


class ProposerJob(TrainJob):
    """One proposer update: the planned groups, trained with TRL GRPO (`rollout_func`)."""

    task_dirs: list[Path] = Field(default_factory=list, description="Unused by this job.")
    groups: list[ProposerGroup]
    group_size: int = Field(ge=2)
    groups_per_step: int = Field(
        default=2, ge=1, description="Groups in one optimizer step's batch."
    )
    max_completion_tokens: int | None = Field(
        default=None,
        ge=16,
        description="A longer conversation is cut (its tail, often the `submit` call, is not "
        "trained). None: the longest recorded episode, so none is cut (each was served inside "
        "the policy's window; the ~5.6k-token brief costs more than the completion).",
    )
    temperature: float = Field(
        default=DEFAULT_TEMPERATURE,
        gt=0,
        description="The proposals' sampling temperature: the trainer scores logprobs at it.",
    )

    def schedule(self) -> ProposerSchedule:
        """All groups in one generation, split into optimizer steps of <= `groups_per_step`
        groups (a divisor of the group count, so every batch is whole), passed over again when
        `hyper.steps` asks for more steps than one pass has. From the second step on, TRL scores
        each step against the logprobs it computed at the generation with the starting weights
        (the clipped importance ratio): a reused episode is corrected, not treated as fresh."""
        n = len(self.groups)
        per_step = max(d for d in range(1, min(self.groups_per_step, n) + 1) if n % d == 0)
        per_generation = n // per_step
        return ProposerSchedule(
            groups_per_step=per_step,
            steps_per_generation=per_generation,
            num_iterations=-(-self.hyper.steps // per_generation),
        )


class TRLProposerBackend(WorkerBackend):
    """TRL GRPOTrainer over recorded proposer rollouts in a child Python; publishes like GRPO."""

    worker_module = "autoenvscaling.training.proposer.worker"
    worker_name = "proposer GRPO worker"
