"""The RL backend protocol: train on a job (base checkpoint + tasks + hyper-parameters) -> result.

The training node in the flywheel only sees these models. A backend runs wherever it likes (the TRL
backend: a subprocess that owns torch); it never publishes a half-trained checkpoint: either the
result names a new checkpoint that is fully published, or it names none and says why.
Import-light on purpose: the graph process imports this module and must never import torch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field, model_validator

from ..tools.agents.solver_interface import (
    MAX_TIMEOUT_SEC,
    OUTPUT_CHARS,
    SOLVER_MAX_TURNS,
)
from ..tools.sandbox.harbor_backends import (
    HarborBackendError,
    check_stages,
    validate_backend,
)
from .policy import Checkpoint


class TrainHyperParams(BaseModel):
    """Training knobs, sized for the embedded CPU round; `trl_config` sets any other TRL field."""

    steps: int = Field(default=2, ge=1, description="Optimizer steps (GRPOConfig.max_steps).")
    learning_rate: float = Field(default=1e-4, gt=0)
    num_generations: int = Field(
        default=4, ge=2, description="Rollouts per task per step (the group size)."
    )
    tasks_per_step: int = Field(
        default=2, ge=1, description="Groups per step; batch = this x num_generations."
    )
    # -- the episode: the served solver's, field for field (graphs/flywheel/episode_budget.py fills these
    # from the run's settings; the defaults are ModelConfig's and the solver graph's).
    max_reply_tokens: int = Field(
        default=1024,
        ge=1,
        description="Cap on one reply: the served max_tokens (TRL: max_new_tokens per generation).",
    )
    max_turns: int = Field(
        default=SOLVER_MAX_TURNS,
        ge=1,
        description="Model calls whose tool calls run: the served solver's max_turns (TRL: "
        "max_tool_calling_iterations; TRL then lets the model reply once more to the last result, "
        "a reply whose tool calls never run).",
    )
    temperature: float = Field(default=0.7, gt=0, description="Sampling temperature, as served.")
    context_window: int | None = Field(
        default=None,
        ge=64,
        description="The policy's context window; bounds the episode as the server does.",
    )
    max_completion_length: int | None = Field(
        default=None,
        ge=8,
        description="Token budget of one episode (every reply plus tool output); None = the served "
        "episode's bound (`episode_tokens`).",
    )
    beta: float = Field(
        default=0.0, ge=0, description="KL coefficient; 0 = no reference model (cheaper)."
    )
    lora: bool = Field(
        default=True, description="Train a LoRA adapter (peft) instead of all weights."
    )
    lora_rank: int = Field(default=8, ge=1)
    lora_alpha: int = Field(default=16, ge=1)
    lora_target_modules: list[str] | str = Field(
        default="all-linear",
        description="peft target_modules; 'all-linear' = every linear layer but lm_head.",
    )
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="'auto' = cuda when available, else cpu (fp32)."
    )
    use_vllm: bool = Field(default=False, description="Generate with vLLM (GPU only).")
    vllm_mode: Literal["colocate", "server"] = "colocate"
    vllm_server_base_url: str | None = Field(default=None, description="For vllm_mode='server'.")
    vllm_gpu_memory_utilization: float = Field(default=0.3, gt=0, le=1)
    gradient_checkpointing: bool = Field(
        default=True,
        description="Recompute activations in the backward pass (TRL's default): trades step time "
        "for peak memory (benchmarks/RESULTS.md has the measured GRPO step).",
    )
    micro_batch_size: int | None = Field(
        default=1,
        ge=1,
        description="Rollouts per forward/backward pass. The step's num_generations x "
        "tasks_per_step rollouts are still generated, scored and normalised together, and their "
        "gradients accumulate into one optimizer step (the same update); a pass holds only this "
        "many sequences' activations. None = all in one pass (faster on a GPU with room).",
    )
    command_timeout_sec: float = Field(
        default=MAX_TIMEOUT_SEC,
        gt=0,
        description="The longest a `run` call may wait in an episode: the served terminal's "
        "(600 s) unless a test lowers it; the model's own timeout_sec (default 60) applies below.",
    )
    tool_output_chars: int = Field(
        default=OUTPUT_CHARS, ge=1, description="Cap on one tool result shown to the model."
    )
    torch_threads: int | None = Field(
        default=None, description="torch.set_num_threads in the worker (CPU)."
    )
    measure_behaviour: bool = Field(
        default=True,
        description="Measure what the update did to the policy's behaviour (`Behaviour`): one "
        "more forward pass without gradient per rollout before and after each step, and the "
        "probe set's KL at the job's start and end.",
    )
    trl_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Any fields of the trainer's TRL config (GRPOConfig, SFTConfig), over ours: "
        "e.g. {'save_steps': 5, 'report_to': 'wandb', 'lr_scheduler_type': 'cosine'}.",
    )

    def episode_tokens(self, prompt_tokens: int) -> int:
        """TRL's max_completion_length for episodes whose longest prompt is `prompt_tokens`: the
        bound a served episode has. Every reply at its cap plus every tool result at its cap (in
        characters, which no tokenizer exceeds in tokens), within what the context window leaves
        after the prompt. An explicit `max_completion_length` wins."""
        if self.max_completion_length is not None:
            return self.max_completion_length
        replies = (self.max_turns + 1) * self.max_reply_tokens  # TRL's last reply included
        results = self.max_turns * (self.tool_output_chars + 256)  # + the status lines
        budget = replies + results
        if self.context_window is not None:
            budget = min(budget, self.context_window - prompt_tokens)
        return max(budget, 8)

    def generation_kwargs(self) -> dict[str, int]:
        """The per-reply cap as TRL's generation backend takes it (transformers or vLLM)."""
        return {("max_tokens" if self.use_vllm else "max_new_tokens"): self.max_reply_tokens}

    def passes(self, rollouts: int) -> tuple[int, int]:
        """(rollouts per pass, passes) for one optimizer step over `rollouts` rollouts: the largest
        pass size up to micro_batch_size that divides them (TRL splits the step evenly)."""
        size = min(self.micro_batch_size or rollouts, rollouts)
        while rollouts % size:
            size -= 1
        return size, rollouts // size


class TrainJob(BaseModel):
    """One training run: where to start, what to train on, how."""

    job_id: str
    base_model: str = Field(description="HF model folder (or name) the policy family is based on.")
    parent: Checkpoint | None = Field(
        default=None,
        description="Checkpoint to continue from; None = train from base_model itself.",
    )
    task_dirs: list[Path] = Field(description="Admitted Harbor task folders of this round.")
    replay_task_dirs: list[Path] = Field(
        default_factory=list, description="Older pool tasks replayed."
    )
    replay_priority: dict[str, float] = Field(
        default_factory=dict,
        description="Replay task folder name -> the chance a GRPO group of it has reward "
        "variance (graphs/flywheel/training.py: from the pool's measures); replay is drawn highest "
        "first (plan_steps).",
    )
    hyper: TrainHyperParams = Field(default_factory=TrainHyperParams)
    work_dir: Path = Field(
        description="Scratch folder for the worker (weights, logs, result.json)."
    )
    sandbox_backend: str = Field(
        default="podman",
        description="Episode sandboxes: podman | docker | harbor:<type> (Harbor's own).",
    )
    sandbox_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Harbor EnvironmentConfig fields passed through (harbor:<type> backends).",
    )
    system_prompt: str | None = Field(default=None, description="System message of every episode.")

    @model_validator(mode="after")
    def _sandboxes_can_run_episodes(self) -> TrainJob:
        # Fails here, in the caller's process, before a worker or any sandbox starts.
        try:
            validate_backend(self.sandbox_backend, self.sandbox_options)
            check_stages(self.sandbox_backend, ["grpo"])
        except HarborBackendError as exc:
            raise ValueError(str(exc)) from None
        return self


class LogpShift(BaseModel):
    """Completions' mean log-probability per token under the policy before and after an update:
    the same tokens after the same prompts, scored by the trainer's model at the sampling
    temperature. Only the policy's own tokens count (tool output is not)."""

    before: float
    after: float
    tokens: int = Field(ge=0, description="Tokens averaged over (each token weighs the same).")
    completions: int = Field(ge=0)

    @property
    def change(self) -> float:
        return self.after - self.before

    def __str__(self) -> str:
        return f"{self.before:.4f} -> {self.after:.4f} ({self.change:+.4f}, {self.completions} c.)"


class BehaviourStep(BaseModel):
    """One optimizer step: what it rewarded (advantage > 0) and penalised (advantage < 0);
    None where the step had no such completion (a group without reward variance has neither)."""

    step: int
    rewarded: LogpShift | None = None
    penalised: LogpShift | None = None


class Behaviour(BaseModel):
    """What a training job did to the policy's behaviour (training/grpo/behaviour.py).

    Learning shows as `rewarded.change > 0` and `penalised.change < 0`: the update made what it
    rewarded more likely and what it penalised less likely. `probe_kl` is how far the policy
    moved on a fixed probe set (training/grpo/probe.json) from the checkpoint the job started
    from: 0.0 when nothing changed, whatever the optimizer's step size."""

    steps: list[BehaviourStep] = Field(default_factory=list)
    rewarded: LogpShift | None = Field(
        default=None, description="Every step's rewarded tokens, each before/after its step."
    )
    penalised: LogpShift | None = None
    probe_kl: float | None = Field(
        default=None, ge=0, description="Mean per-token KL(after || start) on the probe set."
    )
    probe_tokens: int = 0
    temperature: float = Field(default=1.0, gt=0, description="The policy's, as TRL scores it.")

    def line(self) -> str:
        """The round report's behaviour line."""
        kl = "n/a" if self.probe_kl is None else f"{self.probe_kl:.3g}"
        return (
            f"rewarded logp {self.rewarded or 'n/a'}; penalised logp {self.penalised or 'n/a'}; "
            f"KL to the previous checkpoint on the probe set {kl} ({self.probe_tokens} tokens)"
        )

    def summary(self) -> dict[str, float | str | None]:
        """Flat numbers for the round's metrics (`training`), and the line."""
        out: dict[str, float | str | None] = {"behaviour": self.line(), "probe_kl": self.probe_kl}
        for name, shift in (("rewarded", self.rewarded), ("penalised", self.penalised)):
            out[f"{name}_logp_before"] = shift.before if shift else None
            out[f"{name}_logp_after"] = shift.after if shift else None
        return out


class TrainResult(BaseModel):
    """What came out of a job. `checkpoint` is None when nothing was learned, with `reason` saying why."""

    job_id: str
    checkpoint: Checkpoint | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)
    steps_done: int = 0
    groups_total: int = 0
    groups_dropped_no_variance: int = Field(
        default=0, description="Groups whose rewards were all equal: zero advantage, no gradient."
    )
    reason: str | None = Field(
        default=None, description="Why no checkpoint was published (None if one was)."
    )
    duration_sec: float = 0.0
    log_path: Path | None = None
    behaviour: Behaviour | None = Field(
        default=None, description="What the update did to behaviour; None: not measured."
    )


class TrainProgress(BaseModel):
    """A progress event streamed by a backend while it trains."""

    job_id: str
    stage: str = Field(description="'load', 'step', 'save', 'done', ...")
    step: int = 0
    total_steps: int = 0
    message: str = ""
    metrics: dict[str, Any] = Field(default_factory=dict)
    rank: int = Field(
        default=0, ge=0, description="The worker process that sent it (0: the main one)."
    )


ProgressCallback = Callable[[TrainProgress], None]


class TrainingError(RuntimeError):
    """Training did not finish; no checkpoint was published and the registry is unchanged."""


@runtime_checkable
class RLBackend(Protocol):
    async def train(self, job: TrainJob, progress: ProgressCallback | None = None) -> TrainResult:
        """Train on `job`. Publishes at most one checkpoint; raises `TrainingError` on failure."""
        ...
