"""What the admission gate checks and how hard: one pydantic model, also the graph's context.

Every field has a description (LangGraph Studio renders them as the run's context form) and an
environment-variable fallback (`AUTOENVSCALING_GATE_<FIELD>`, lists and dicts as JSON).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..sandbox.harbor_backends import (
    HarborBackendError,
    check_stages,
    validate_backend,
)

StageName = Literal[
    "lint", "build", "oracle", "nop", "repeat", "anti_cheat", "decontam", "calibrate", "dedup"
]
#: The gate's stages in the order they run (cheapest and strictest first; the table in
#: ARCHITECTURE.md). A candidate stops at the first stage it fails.
STAGES: tuple[StageName, ...] = get_args(StageName)

GateBackend = str  # one of our engines, harbor-docker, or harbor:<type>
#: When anti_cheat's isolation probes (a live tamperer, interpreter wrappers) run: "auto" on
#: tasks whose verifier is separate, "on" on every task, "off" on none.
IsolationProbe = Literal["auto", "on", "off"]
#: Stages that start a sandbox, by the name their row has in harbor_backends.STAGE_NEEDS.
SANDBOX_STAGES: tuple[StageName, ...] = (
    "build",
    "oracle",
    "nop",
    "repeat",
    "anti_cheat",
    "calibrate",
)


class GateConfig(BaseSettings):
    """Admission-gate parameters. Defaults follow ARCHITECTURE.md ("The admission gate")."""

    model_config = SettingsConfigDict(env_prefix="AUTOENVSCALING_GATE_", extra="forbid")

    backend: str = Field(
        default="podman",
        description="Engine for builds and trials: podman (ours, daemonless), docker (a running "
        "daemon), harbor-docker (Harbor's own docker compose backend) or harbor:<type> (Harbor's "
        "environment types, e.g. harbor:modal; see README 'Scaling out').",
    )
    environment_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Harbor EnvironmentConfig fields passed through to every trial (e.g. "
        '{"kwargs": {...}, "override_cpus": 2} for a harbor:<type> backend).',
    )
    allow_internet: bool = Field(
        default=False,
        description="The user's network policy: a task that declares the internet "
        "(allow_internet = true, or an explicit network_mode) may have it. Without this, no "
        "task gets a network, and one that fetches gets a verdict naming what it fetches. "
        "Recorded in every verdict.",
    )
    repeat: int = Field(
        default=2,
        ge=0,
        description="How many more times the oracle runs after the first oracle trial; "
        "every rerun must give the same reward (catches flaky verifiers).",
    )
    verifier_reruns: int = Field(
        default=8,
        ge=0,
        description="Verifier-only reruns on the oracle's saved work, in the first repeat "
        "trial's container (no extra container start); with the oracle and `repeat` reruns, the "
        "verdict states the flake rate caught with 95% confidence.",
    )
    nop_threshold: float = Field(
        default=0.5, description="An empty attempt (Harbor's nop agent) must score below this."
    )
    band: tuple[float, float] = Field(
        default=(0.25, 0.75),
        description="Calibration band: the solver's mean reward must lie inside.",
    )
    calibration_rollouts: int = Field(
        default=4, ge=1, description="Solver rollouts for calibration."
    )
    calibration_rollouts_near_edge: int = Field(
        default=8,
        ge=1,
        description="Total rollouts when the first mean is within `edge_margin` of an edge.",
    )
    edge_margin: float = Field(
        default=0.15,
        ge=0.0,
        description="How close to a band edge a mean must be to earn more rollouts.",
    )
    solver: str | None = Field(
        default=None,
        description="The current solver as a Harbor agent: 'oracle', 'nop' or an import "
        "path 'module:Class'. None skips calibration (reported as 'no solver configured').",
    )
    solver_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments for the solver agent's constructor."
    )
    solver_env: dict[str, str] = Field(
        default_factory=dict, description="Environment variables for the solver agent."
    )
    cheat_model: str | None = Field(
        default=None,
        description="anti_cheat's cheat agent: the solver's agent (same tools and budget) with "
        "the prompt prompts/cheat.md, on this init_chat_model string (e.g. 'openai:policy'). "
        "None: the cheat agent does not run, and the verdict says so.",
    )
    cheat_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible endpoint for `cheat_model` (None: the provider's).",
    )
    cheat_max_turns: int = Field(default=20, ge=1, description="Turn budget of the cheat agent.")
    solver_agent: str | None = Field(
        default=None,
        description="Our solver as a Harbor agent (import path 'module:Class'), which the cheat "
        "agent runs with `cheat_model`. The layer above sets it (graphs.solver.SOLVER_AGENT): the "
        "gate names no agent of a higher layer itself.",
    )
    cheat_agent: str | None = Field(
        default=None,
        description="Another Harbor agent (import path 'module:Class') to run as the cheat "
        "agent instead of the solver with `cheat_model`.",
    )
    cheat_agent_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments for `cheat_agent`."
    )
    near_miss: bool = Field(
        default=True,
        description="anti_cheat runs the task's tests on wrong answers derived from the "
        "oracle's outputs; any that scores >= `nop_threshold` rejects the task.",
    )
    max_near_misses: int = Field(
        default=4,
        ge=1,
        description="Most near-miss variants tried per task (each is one test run).",
    )
    tamperer_probe: IsolationProbe = Field(
        default="auto",
        description="anti_cheat leaves a process running after the agent phase that tampers "
        "with /tests, the outputs and the reward during verification; it must score below the "
        "threshold. 'auto': on every task whose verifier is separate (a fresh container: the "
        "probe is the regression test of that isolation); a task whose verifier shares the "
        "agent's container cannot defend itself against a live process, so there it does not "
        "run and the verdict says so. 'on': every task (needs a backend that ends the agent's "
        "processes before a shared verifier: 'reap'). 'off': none.",
    )
    tamper_interpreters: IsolationProbe = Field(
        default="auto",
        description="anti_cheat plants always-pass python3/pytest wrappers on PATH; they must "
        "not reach the verifier. 'auto', 'on' and 'off' as for `tamperer_probe` (a shared "
        "verifier runs the agent's interpreters, so no task on one can defend against this).",
    )

    @field_validator("tamperer_probe", "tamper_interpreters", mode="before")
    @classmethod
    def _switch_as_mode(cls, value: object) -> object:
        # The fields were switches: True/False (or "true"/"false" from the environment) still
        # mean "on"/"off".
        if isinstance(value, str) and value.lower() in {"true", "false"}:
            value = value.lower() == "true"
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value

    leak_min_bytes: int = Field(
        default=16,
        ge=1,
        description="Smallest file anti_cheat compares against the agent's image "
        "(tiny files such as '3\\n' match by chance).",
    )
    heldout_dirs: list[Path] = Field(
        default_factory=list,
        description="Held-out benchmark folders (task folders or .md/.txt "
        "files) whose instructions a candidate must not share a word n-gram with.",
    )
    ngram: int = Field(default=13, ge=1, description="n of the decontamination n-gram check.")
    pool_dir: Path | None = Field(
        default=None,
        description="The task pool a candidate must not nearly duplicate. None skips dedup.",
    )
    dedup_threshold: float = Field(
        default=0.8,
        gt=0.0,
        le=1.0,
        description="MinHash Jaccard similarity at which a task is a duplicate.",
    )
    skip: list[StageName] = Field(
        default_factory=list, description="Stages not to run (reported as skipped)."
    )
    concurrency: int = Field(
        default=2, ge=1, description="Candidates validated at once (batch graph)."
    )
    trial_concurrency: int = Field(
        default=4,
        ge=1,
        description="Harbor trials in flight at once in this process, over all candidates.",
    )
    trials_dir: Path | None = Field(
        default=None,
        description="Keep every trial folder under this folder; None: temporary, deleted.",
    )
    timeout_multiplier: float = Field(
        default=1.0, gt=0.0, description="Scales the task's own agent and verifier timeouts."
    )
    max_trial_sec: float = Field(
        default=1800.0,
        gt=0.0,
        description="Hard cap on one trial's wall time (build, agent and verifier together), "
        "whatever the task's timeouts say; a trial past it is stopped and blamed on the task.",
    )
    max_artifact_bytes: int = Field(
        default=1_000_000,
        ge=1024,
        description="Most bytes kept of any one file a trial stores (its tail; the full size is "
        "recorded).",
    )

    @field_validator("band")
    @classmethod
    def _ordered_band(cls, band: tuple[float, float]) -> tuple[float, float]:
        if not 0.0 <= band[0] <= band[1] <= 1.0:
            raise ValueError(f"band must satisfy 0 <= low <= high <= 1, got {band}")
        return band

    @model_validator(mode="after")
    def _backend_can_run_the_stages(self) -> GateConfig:
        # Before any sandbox starts: a bad name or option, or a stage the backend cannot serve.
        try:
            validate_backend(self.backend, self.environment_options)
            check_stages(self.backend, self.sandbox_stages())
        except HarborBackendError as exc:
            raise ValueError(str(exc)) from None
        return self

    def sandbox_stages(self) -> list[str]:
        """The harbor_backends.STAGE_NEEDS rows this configuration runs."""
        rows = [f"gate:{s}" for s in SANDBOX_STAGES if s not in self.skip]
        if "anti_cheat" not in self.skip:
            # On a separate verifier the agent's container is gone before the tests run, on
            # any backend; only "on" also aims the probes at shared verifiers, which needs the
            # backend to end the agent's processes ('reap').
            rows += ["gate:anti_cheat/tamperer"] if self.tamperer_probe == "on" else []
            rows += ["gate:anti_cheat/interpreters"] if self.tamper_interpreters == "on" else []
            # The cheat agent is our solver agent unless another Harbor agent is named.
            ours = (self.cheat_agent is not None and self.cheat_agent == self.solver_agent) or (
                self.cheat_model and not self.cheat_agent
            )
            rows += ["gate:anti_cheat/cheat_agent"] if ours else []
        if "calibrate" not in self.skip and self.solver and self.solver == self.solver_agent:
            rows.append("gate:calibrate/our_solver")
        return rows

    @model_validator(mode="after")
    def _enough_rollouts(self) -> GateConfig:
        if self.calibration_rollouts_near_edge < self.calibration_rollouts:
            raise ValueError(
                "calibration_rollouts_near_edge must be >= calibration_rollouts "
                f"({self.calibration_rollouts_near_edge} < {self.calibration_rollouts})"
            )
        return self

    def with_skip(self, *stages: str) -> GateConfig:
        """A copy that also skips `stages` (unknown names raise, listing the valid ones)."""
        unknown = sorted(set(stages) - set(STAGES))
        if unknown:
            raise ValueError(f"unknown stage(s) {unknown}; the stages are {list(STAGES)}")
        merged = [s for s in STAGES if s in set(self.skip) | set(stages)]
        return self.model_copy(update={"skip": merged})
