"""The run's settings, declared once: `RunConfig`.

Everything else is derived from this model: the flywheel's `context_schema` (Studio's form), the
options of `autoenvscaling run` (cli/config_options.py builds them from the fields, so a new field
shows in `--help` without copying), the manifest's `config`, and the presets below. A field shows
on the command line when it carries a `Cli` marker; the marker holds only what the command line
needs beyond the field itself (a short flag, another flag name, a path type).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator

from ..tools.agents.solver_interface import OUTPUT_CHARS, SOLVER_MAX_TURNS
from .policy_servers import PolicyServers

#: The task folders shipped with the package (tasks/seed, tasks/starter).
REPO_TASKS = Path(__file__).resolve().parents[1] / "tasks"
#: The pool's seed when a run names none.
REPO_SEED = REPO_TASKS / "seed"
#: The shared policy's model when none is named: the name a policy server serves it under.
DEFAULT_POLICY_MODEL = "openai:policy"
#: The proposer's turn limit (model calls per episode) wherever none is given: the flywheel's
#: `proposer_max_turns`, `autoenvscaling propose`, the proposer graph served to Studio and
#: `ProposerSettings`. Only the embedded preset differs (a 135M policy on 2 CPU cores).
PROPOSER_MAX_TURNS = 16
#: The proposer's other budgets per episode, wherever none is given (the same entry points).
PROPOSER_MAX_TOTAL_TOKENS = 400_000
PROPOSER_TIME_BUDGET_SEC = 1800.0


@dataclass(frozen=True)
class Cli:
    """How a setting shows as an option of `autoenvscaling run`.

    `flag` names the option when it differs from the field (`--model` for `policy_model`);
    `help` replaces the field's description on the command line; `type` is the command line's
    type when it differs (folders are `Path` there, `str` in the configuration); `unset` makes
    the option default to None: the value is then resolved at run time (from a preset, or from
    the policy server the run starts) instead of taken from the field's default."""

    flag: str | None = None
    short: str | None = None
    help: str | None = None
    type: Any = None
    unset: bool = False


class RunConfig(BaseModel):
    """The run's settings; Studio shows them as the flywheel's form."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    run_dir: Annotated[
        str, Cli(type=Path, unset=True, help="Run folder (default: runs/<timestamp>)")
    ] = Field(default="runs/default", description="Run folder")
    store: Annotated[
        str | None,
        Cli(
            help="A postgresql:// URL for the rollout store and the checkpointer (default: "
            "SQLite files in the run folder); runs sharing it stay apart"
        ),
    ] = Field(
        default=None,
        description="PostgreSQL URL for the rollouts and checkpoints (None: SQLite in the run folder)",
    )
    rounds: Annotated[int, Cli(short="-r")] = Field(default=1, description="Rounds to run")
    proposals: Annotated[int, Cli(short="-k")] = Field(default=2, description="Proposers per round")
    calibrate: Annotated[bool, Cli(help="Calibrate candidates against the solver")] = Field(
        default=True, description="Run the calibrate stage"
    )
    max_tokens: Annotated[int, Cli()] = Field(default=4096, description="Cap on one model reply")
    context_window: Annotated[
        int | None,
        Cli(
            unset=True,
            help="The policy's context window in tokens (default: the embedded "
            "server's, else unknown: prompts are not fitted)",
        ),
    ] = Field(
        default=None,
        description="Policy context window (tokens); prompts are fitted into it when known",
    )
    temperature: Annotated[
        float, Cli(help="Sampling temperature of the policy, served and in GRPO")
    ] = Field(default=0.7, gt=0, description="Policy sampling temperature (served and GRPO)")
    tool_output_chars: Annotated[
        int, Cli(help="Cap on one terminal result the model sees, served and in GRPO")
    ] = Field(default=OUTPUT_CHARS, ge=1, description="Cap on one terminal result (characters)")
    train_steps: Annotated[
        int, Cli(help="The solver's GRPO optimizer steps per round (0: the solver is not trained)")
    ] = Field(default=2, ge=0, description="The solver's GRPO optimizer steps")
    learning_rate: Annotated[
        float, Cli(help="GRPO learning rate (LoRA), both roles, constant through a round")
    ] = Field(default=1e-4, gt=0, description="GRPO learning rate (LoRA), both roles")
    policy_model: Annotated[
        str, Cli(flag="--model", unset=True, help="Shared policy model, e.g. openai:Qwen/Qwen3-8B")
    ] = Field(default=DEFAULT_POLICY_MODEL, description="Shared policy (both roles)")
    policy_base_url: Annotated[
        str | None, Cli(flag="--base-url", help="Its OpenAI-compatible endpoint (vLLM...)")
    ] = Field(default=None, description="Policy endpoint (vLLM etc.)")
    policy_tool_choice: str | None = Field(
        default=None, description="'auto' for servers that constrain tool calls"
    )
    proposer_model: Annotated[str | None, Cli(help="Override the proposer's model")] = Field(
        default=None, description="Override: proposer model"
    )
    proposer_base_url: Annotated[str | None, Cli()] = Field(
        default=None, description="Its endpoint"
    )
    solver_model: str | None = Field(default=None, description="Override: solver model")
    solver_base_url: str | None = Field(default=None, description="Its endpoint")
    arm: Annotated[str, Cli()] = Field(
        default="terminal", description="terminal | error_feedback | prompt_only"
    )
    solver_feedback: Annotated[bool, Cli()] = Field(
        default=True, description="Give proposers the solver's rollouts"
    )
    max_revisions: int = Field(default=2, description="Revisions after a rejection")
    proposer_compact_prompt: bool = Field(
        default=False, description="The proposer's compact system prompt (small policies)"
    )
    train: Annotated[bool, Cli()] = Field(default=True, description="Run the training node")
    base_model: Annotated[str | None, Cli(help="HF weights of the policy (training)")] = Field(
        default=None, description="HF weights of the policy, for training"
    )
    policy_server: Annotated[
        str,
        Cli(
            unset=True,
            help="auto | embedded | vllm | none (auto: embedded with no --model and no "
            "--base-url, vllm with --base-url, else none)",
        ),
    ] = Field(
        default="auto",
        validate_default=True,
        description="auto | embedded | vllm | none: who serves and swaps the policy; auto: "
        "embedded when no model and no endpoint are named (the run starts it), vllm with an "
        "endpoint, else none",
    )
    backend: Annotated[str, Cli()] = Field(default="podman", description="podman | docker")
    heldout_dir: Annotated[
        str | None,
        Cli(
            flag="--heldout",
            type=Path,
            help="Held-out task folder (any benchmark of Harbor tasks): the served solver is "
            "evaluated on it before round 1 and after every round, never trained on it; the "
            "gate's decontam checks candidates against it",
        ),
    ] = Field(default=None, description="Held-out evaluation tasks (never trained on)")
    heldout_samples: Annotated[
        int, Cli(help="Solver samples per held-out task in each held-out evaluation")
    ] = Field(default=4, ge=0, description="Samples per held-out task (0: no evaluation)")
    proposer_heldout_briefs: Annotated[
        int,
        Cli(
            help="Held-out briefs the served proposer is evaluated on before round 1 and after "
            "every round (0: none; graphs/flywheel/proposer_heldout.py)"
        ),
    ] = Field(default=0, ge=0, description="Held-out briefs for the proposer (0: no evaluation)")
    proposer_heldout_samples: Annotated[
        int, Cli(help="Proposer attempts per held-out brief in each evaluation")
    ] = Field(default=2, ge=0, description="Proposer attempts per held-out brief")
    proposer_heldout_dir: Annotated[
        str | None,
        Cli(
            type=Path,
            help="Tasks the held-out briefs show the proposer (default: --heldout): never in a "
            "brief it trains on",
        ),
    ] = Field(default=None, description="Example tasks of the proposer's held-out briefs")
    decontam_dirs: Annotated[
        list[str],
        Cli(
            flag="--decontam",
            type=list[Path],
            unset=True,
            help="Benchmark to decontaminate against (repeatable): a folder of Harbor tasks "
            "(e.g. a Terminal-Bench checkout) or a prepared index; none = not checked",
        ),
    ] = Field(default_factory=list, description="Benchmarks to decontaminate against")
    seed_dir: Annotated[str | None, Cli(type=Path, help="Initial pool (default: tasks/seed)")] = (
        Field(default=None, description="Initial pool")
    )
    human_review: Annotated[bool, Cli(help="Pause to review admissions")] = Field(
        default=False, description="Pause for a human to review admissions"
    )
    proposer_max_turns: Annotated[int, Cli()] = Field(
        default=PROPOSER_MAX_TURNS, description="Proposer model calls"
    )
    solver_max_turns: Annotated[int, Cli()] = Field(
        default=SOLVER_MAX_TURNS, description="Solver model calls"
    )
    refresh_attempts: Annotated[int, Cli()] = Field(
        default=2, ge=0, description="Solver attempts per task (0: no refresh)"
    )
    refresh_limit: Annotated[int, Cli(help="Pool tasks re-measured per round")] = Field(
        default=0, description="Pool tasks re-measured (0=all)"
    )
    band_low: float = Field(default=0.25, description="Difficulty band, low")
    band_high: float = Field(default=0.75, description="Difficulty band, high")
    calibration_rollouts: int = Field(default=4, description="Solver rollouts")
    baseline_tasks: int = Field(
        default=4, description="Pool tasks measured before round 1 (0=none)"
    )
    baseline_attempts: int = Field(default=1, description="Solver attempts per baseline task")
    concurrency: int = Field(default=2, description="Trials in flight")
    train_tasks_per_step: int = Field(default=2, description="GRPO groups per step")
    brief_examples: int = Field(default=2, description="Example tasks in the brief")
    brief_file_chars: int = Field(default=2500, description="Cap per example file")
    num_generations: Annotated[
        int, Cli(help="GRPO group size: rollouts of one task in one step (variance needs >= 2)")
    ] = Field(default=4, ge=2, description="GRPO group size")
    proposer_training: Annotated[
        bool, Cli(help="Train the proposer on the gate's reward (run mode)")
    ] = Field(default=True, description="Train the proposer on the gate's reward too")
    proposer_reward: Annotated[
        Literal["gate", "graded"],
        Cli(
            type=str,  # typer takes no Literal; the field's type checks the value
            help="gate | graded: the proposer's GRPO reward: the gate's (+1 / -0.25 / -1), or graded by the "
            "working stages a rejected task passed",
        ),
    ] = Field(
        default="gate",
        description="Proposer reward arm: 'gate' or 'graded' (training/proposer/update.py)",
    )
    proposer_update_every: Annotated[int, Cli(unset=True)] = Field(
        default=1, description="Proposer GRPO update every N rounds"
    )
    proposer_group_size: Annotated[
        int, Cli(unset=True, help="Proposers sharing a brief (proposer GRPO group; >= 2)")
    ] = Field(
        default=1, description="Proposers sharing one brief: a proposer GRPO group needs >= 2"
    )
    proposer_train_steps: int = Field(default=1, description="Proposer GRPO steps")
    train_trl_config: dict[str, Any] = Field(
        default_factory=dict,
        description="TRL GRPOConfig fields for the solver's training, over ours (any field)",
    )
    proposer_trl_config: dict[str, Any] = Field(
        default_factory=dict, description="TRL GRPOConfig fields for the proposer's training"
    )
    cold_start_trl_config: dict[str, Any] = Field(
        default_factory=dict, description="TRL SFTConfig fields for the cold start's SFT"
    )
    cold_start: Annotated[
        bool,
        Cli(
            unset=True,
            help="Start both roles from a cold-start checkpoint: SFT on verified solver and "
            "proposer episodes replayed on --cold-start-tasks, built once per machine (default: "
            "on for the embedded policy, off otherwise; graphs/cold_start/start.py)",
        ),
    ] = Field(default=False, description="The policy starts from a cold-start checkpoint")
    cold_start_tasks: Annotated[
        str | None,
        Cli(
            type=Path,
            help="Tasks the cold start replays: a folder sharing no task with the pool's seed "
            "or the held-out set (the embedded default: tasks/starter)",
        ),
    ] = Field(
        default=None,
        description="Tasks the cold start replays (disjoint from the pool's seed and held-out)",
    )
    policy_checkpoint_id: str | None = Field(
        default=None, description="Registry id of the starting checkpoint"
    )
    price_per_mtok: tuple[float, float] = Field(
        default=(0.0, 0.0), description="USD per 1M prompt / completion tokens"
    )

    @field_validator("policy_server")
    @classmethod
    def _resolve_policy_server(cls, value: str, info: ValidationInfo) -> str:
        """`auto` becomes the server the named model and endpoint imply (the one rule, for the
        command line and Studio alike); a named kind stays."""
        if value != "auto":
            return value
        base_url = info.data.get("policy_base_url")
        if base_url:
            return "vllm"
        return "embedded" if info.data.get("policy_model") == DEFAULT_POLICY_MODEL else "none"

    def decontam_sources(self) -> list[str]:
        """What the gate's decontam checks candidates against: the named benchmarks, and the
        held-out split (a proposer must not write the tasks the policy is evaluated on)."""
        sources = list(self.decontam_dirs)
        if self.heldout_dir and self.heldout_dir not in sources:
            sources.append(self.heldout_dir)
        return sources

    def embedded_default(self) -> bool:
        """The policy is the embedded default: the embedded server, with no model and no endpoint
        named. A run with such a configuration starts the server itself (the CLI before the
        graph; the graph when nothing started it: Studio, an app) and stops it at the end."""
        return (
            self.policy_server == "embedded"
            and self.policy_base_url is None
            and self.policy_model == DEFAULT_POLICY_MODEL
        )

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Self:
        """The settings named in `values`; None and names that are not settings are left out
        (None means "not given": the field's default applies)."""
        names = cls.model_fields
        return cls(**{k: v for k, v in values.items() if k in names and v is not None})


class FlywheelContext(RunConfig):
    """The flywheel graph's runtime context: the run's settings, plus the policy servers the run
    owns (a live resource, so a private attribute: never in Studio's form, the manifest or a
    checkpoint). A context made without servers gets an empty set of its own.

    `served`: when the settings are the embedded default and nothing started its server (Studio,
    an app), the context the graph's nodes run under once the graph started it (graphs/
    flywheel/roles.py: `serve_embedded_default`); None otherwise."""

    _servers: PolicyServers = PrivateAttr(default_factory=PolicyServers)
    _served: FlywheelContext | None = PrivateAttr(default=None)
    _serving: asyncio.Lock = PrivateAttr(default_factory=asyncio.Lock)

    @property
    def servers(self) -> PolicyServers:
        return self._servers

    @property
    def served(self) -> FlywheelContext | None:
        return self._served

    @property
    def serving_lock(self) -> asyncio.Lock:
        """Held while the graph starts the embedded default (parallel branches start one)."""
        return self._serving

    def serve_with(self, served: FlywheelContext | None) -> None:
        """Record (or, None, forget) the context the graph started the policy for."""
        self._served = served

    def with_servers(self, servers: PolicyServers) -> Self:
        """This context, using the run's `servers`."""
        copy = self.model_copy()
        copy._servers = servers
        return copy


#: Presets: settings that differ from the defaults (the defaults are sized for a GPU policy
#: server). "embedded" is sized for one round of about 10 min on 2 CPU cores (SmolLM2-135M at
#: ~50 tokens/s; measured 631 s since GRPO episodes have the served budgets, README), over the
#: generated pool seed (tasks/generated/pool), its cold start built on the starter tasks and its
#: held-out evaluation on tasks/generated/heldout: three splits that share no task
#: (tools/tasks/splits.py checks it in every run); the proposer gets the 9 turns a starter task's
#: authoring takes, with the compact system prompt; the command line wins over a preset, and every
#: value shows in the manifest.
PRESETS: dict[str, dict[str, Any]] = {
    "gpu": {},
    "embedded": {
        "policy_server": "embedded",
        "policy_tool_choice": "auto",
        # Three disjoint splits of compact tasks a 135M policy can solve sometimes and author
        # within its budgets (one-command solutions, files of a few lines; tasks/starter/
        # README.md; the seed pool's tasks take a 135M model nowhere): the cold start replays
        # the hand-written starter tasks; the pool starts from generated variants of the same
        # skills; the held-out evaluation runs on other generated variants (tasks/generated/).
        "cold_start_tasks": str(REPO_TASKS / "starter"),
        "seed_dir": str(REPO_TASKS / "generated" / "pool"),
        "heldout_dir": str(REPO_TASKS / "generated" / "heldout"),
        # One sample on each of the 12 held-out tasks, before round 1 and after each round:
        # measured ~300 s a pass (12 trials at concurrency 2, ~25 s wall each, 2 cores shared
        # with other jobs; the base policy 0/12 = 0.00 [0.00, 0.24]). Fewer samples leave the
        # interval nearly [0, 1]; --heldout-samples 0 skips the evaluation.
        "heldout_samples": 1,
        # The round's two proposals share one brief: one proposer GRPO group (a lone proposal
        # has nothing to compare with and trains nothing), at no extra proposing time. A flat
        # group (both rejected alike, the usual outcome at this size) trains nothing and costs
        # nothing; one with reward variance adds a proposer GRPO step over 2 x (~5.6k prompt +
        # the whole episode, at most the window's rest) tokens: measured 661 s wall with the
        # completion cut to 1k, on 2 cores shared with other jobs, 8.8 GB peak RSS (a
        # SmolLM2-135M-shaped model; --no-proposer-training skips it).
        "proposals": 2,
        "proposer_group_size": 2,
        # Below PROPOSER_MAX_TURNS (the one default elsewhere): a starter task's authoring is
        # five files, a check, a syntax check, submit, and every turn re-reads the conversation.
        "proposer_max_turns": 9,
        # One revision, not two: each is another 9-turn episode over a longer conversation. With
        # two, a round whose proposers both wrote and revised took 640 s (propose + admit 520 s);
        # with one, 240 s (120 s; RESULTS.md, "fifth measurement").
        "max_revisions": 1,
        # ~0.4k instead of ~1.8k tokens: every proposer turn and its cold-start SFT read it.
        "proposer_compact_prompt": True,
        # Below SOLVER_MAX_TURNS (the one default elsewhere): a starter task takes one command,
        # and every turn of a 135M model's episode costs CPU time in refresh, calibration and GRPO.
        "solver_max_turns": 4,
        "max_tokens": 384,
        # Two samples per task on two tasks a round (the window moves on each round): the four
        # refresh trials of one sample on four tasks, the measured round's (README). A task is
        # retired only when the whole 95% interval of one refresh's samples lies outside the band
        # (graphs/flywheel/nodes.py, tools/tasks/pool.py: band_decision).
        "refresh_attempts": 2,
        "refresh_limit": 2,
        "baseline_tasks": 2,
        "calibration_rollouts": 4,
        "train_steps": 2,
        "num_generations": 4,
        "train_tasks_per_step": 1,
        "brief_examples": 1,
        "brief_file_chars": 1200,
    },
}

#: "learn": the learning demonstration (`make learn`, `run --preset learn`; README "Learning on
#: held-out variants"): the embedded preset, turned into "K GRPO steps, then a held-out point".
#: One skill, many variants: the pool starts from 32 generated line-count variants and the
#: served solver is evaluated on 32 others (seed ranges apart, 0 shared by the split check;
#: tasks/generated/README.md). No proposers and no proposer update (the pool stays the training
#: variants), no baseline and no refresh (the held-out point is the measurement; the GRPO
#: rewards are the training-set one). The cold start is the embedded one (tasks/starter).
PRESETS["learn"] = {
    **PRESETS["embedded"],
    "seed_dir": str(REPO_TASKS / "generated" / "learn-train"),
    "heldout_dir": str(REPO_TASKS / "generated" / "learn-heldout"),
    "proposals": 0,
    "proposer_group_size": 1,
    "proposer_training": False,
    "baseline_tasks": 0,
    "refresh_attempts": 0,
    # K: the GRPO steps between two held-out points, each one task x 8 generations: a task the
    # policy solves 1 time in 10 then has reward variance more often than not.
    "train_steps": 4,
    "num_generations": 8,
    # Sampling at 1.0, served and in GRPO: at the embedded 0.7 the cold-started policy's samples
    # of a task are near copies (no variance to learn from; benchmarks/RESULTS.md).
    "temperature": 1.0,
    # Measured (RESULTS, "The learning curve on held-out variants"): 1e-4 moved nothing a
    # held-out point could see, 1e-3 broke the tool-call format in one step (KL 0.67).
    "learning_rate": 3e-4,
    # Two samples on each of the 32 held-out tasks a point: a 64-sample interval.
    "heldout_samples": 2,
}


#: "learn-proposer": the proposer's learning demonstration (`make learn-proposer`; README
#: "Learning on held-out variants"): the embedded preset, turned into "proposer GRPO on training
#: briefs, then a point on held-out briefs". Each round four proposers share one brief built on
#: the pool (tasks/generated/pool): one GRPO group of 4. The held-out point serves the proposer 6
#: briefs built on tasks/generated/heldout (examples it never sees in training), 2 attempts each.
#: The solver is not trained, measured or refreshed: only the proposer's reward moves the policy.
#: `--proposer-reward gate | graded` picks the arm (training/proposer/update.py).
PRESETS["learn-proposer"] = {
    **PRESETS["embedded"],
    "proposals": 4,
    "proposer_group_size": 4,
    # No revision, as at the held-out point: the group compares what one episode writes.
    "max_revisions": 0,
    "proposer_heldout_briefs": 6,
    "proposer_heldout_samples": 2,
    "heldout_samples": 0,
    "baseline_tasks": 0,
    "refresh_attempts": 0,
    "train_steps": 0,
    # As in `learn`: at 0.7 a group's samples are near copies; 3e-4 is the rate that moved the
    # solver without breaking its tool calls.
    "temperature": 1.0,
    "learning_rate": 3e-4,
}


def preset(name: str) -> dict[str, Any]:
    """The values of preset `name`, checked against the configuration (a typo fails here)."""
    values = PRESETS[name]
    RunConfig(**values)  # every name is a setting and every value has its type
    return dict(values)


def given_over_preset(values: dict[str, Any], name: str) -> dict[str, Any]:
    """`values` (the settings given; None: not given) with preset `name` filling in what was not
    given: the command line wins over a preset. An unknown name fails with the presets' names."""
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; presets: {', '.join(sorted(PRESETS))}")
    merged = dict(values)
    for key, value in preset(name).items():
        if merged.get(key) is None:
            merged[key] = value
    return merged


def cli_marker(name: str) -> Cli | None:
    """The `Cli` marker of field `name`, or None when the field is not a command-line option."""
    return next((m for m in RunConfig.model_fields[name].metadata if isinstance(m, Cli)), None)


# -- role contexts: views of the run configuration ------------------------------------------------
# The proposer and solver graphs served on their own (langgraph.json, Studio) take a context of
# their own: a few of the run's settings under the role's names, plus what only a standalone
# graph needs (an output folder, a rollout store). A view field names its run setting; its type
# and description come from there, and only its default may differ (a standalone graph is sized
# for a GPU policy). tests/test_run_config.py checks every view against RunConfig.

#: The key under which a view field names its run setting (also shown in Studio's schema).
RUN_SETTING = "run_setting"


def from_run(setting: str, default: Any = ..., description: str | None = None) -> Any:
    """A role-context field that is the run's `setting`: its description (unless the role words
    it for its own form) and, unless given, its default come from RunConfig."""
    field = RunConfig.model_fields[setting]
    if default is ...:
        default = field.get_default(call_default_factory=True)
    return Field(
        default=default,
        description=description or field.description,
        json_schema_extra={RUN_SETTING: setting},
    )
