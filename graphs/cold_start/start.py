"""The cold start: both roles start from verified trajectories, before round 1.

The paper's recipe: the policy is first fine-tuned on high-quality proposer AND solver
trajectories, then the loop begins. Ours, built from a folder of tasks the gate admits:
- **solver episodes**: each task's reference `solve.sh` replayed through the served solver, one
  terminal command per turn, kept when the task's verifier gives 1.0 (graphs/cold_start/solver_replay.py);
- **proposer episodes**: each task's authoring replayed through the served proposer (the round-1
  brief, a `<file>` block per file, `check`, a syntax check in the terminal, `submit`), kept when the
  gate admits what it submitted against a pool without that task (graphs/proposer/replay.py);
- **run harvests** (optional): solved and admitted attempts of earlier runs.
Only the model's replies are scripted; every tool result is real. The dataset is one JSONL file
in the row format of `export rollouts --format jsonl`, with a card (`card.json`: how many of
each, how many dropped and why, what it cost). SFT on it (TRL's SFTTrainer, LoRA) gives the
checkpoint both roles are served from in round 1: round 0 of the run's policy lineage.

Built once per cache folder and reused while its fingerprint (base model, tasks' content, SFT
settings) holds — like the base image, the first run pays for it.
"""

from __future__ import annotations

import hashlib
import json
import random
import resource
import time
from collections.abc import Callable, Sequence
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ...tools.export.rollouts import wire_messages
from ...tools.one_time import record_one_time_build
from ...tools.rollouts.store import RolloutStore
from ...tools.rollouts.transcripts import load_transcript
from ...tools.tasks.snapshot import content_hash
from ...tools.tasks.splits import SplitCheck, check_splits, require_disjoint
from ...training.backend import TrainHyperParams, TrainingError, TrainProgress
from ...training.checkpoints import CheckpointRegistry
from ...training.serving.embedded_setup import embedded_cache_dir
from ...training.sft.data import SFTExample, deduplicate, harvest_run
from ...training.sft.trl_backend import SFTJob, TRLSFTBackend
from ..models import adopt_checkpoint
from ..proposer.replay import FileForm, ServedProposer, replay_authorings
from .solver_replay import replay_tasks, served_solver_interface

if TYPE_CHECKING:
    from ...training.policy import Checkpoint, PolicyServer
    from ...training.sft.data import SFTExample
    from ..config import RunConfig
    from ..models import Policy

DATASET = "cold-start.jsonl"
CARD = "card.json"
#: Why no episode is calibrated: calibration measures the current solver, and a cold start is
#: what makes the first one.
NO_CALIBRATION = "calibrate not run: a cold start has no solver to calibrate against yet"


class ColdStartSettings(BaseModel):
    """What the cold start trains, and how hard (sized for the embedded CPU policy)."""

    epochs: dict[str, int] = Field(
        default_factory=lambda: {"solver": 4, "proposer": 3},
        description="Passes over each role's episodes. A solver episode is ~0.7k tokens and a "
        "proposer's ~3.9k (the starter tasks, compact proposer prompt, tools rendered): four "
        "solver passes cost less than one proposer pass, and the proposer's three are ~80% of "
        "the SFT's tokens and more of its time (README, cold start). A role not named gets one.",
    )
    steps: int | None = Field(
        default=None, ge=1, description="SFT optimizer steps; None: one per batch of the epochs."
    )
    batch_size: int = Field(default=1, ge=1)
    learning_rate: float = Field(default=1e-3, gt=0)
    lora_rank: int = Field(default=8, ge=1)
    max_length: int = Field(
        default=8192, ge=64, description="Token cap per example (the policy's context)."
    )
    gradient_checkpointing: bool = Field(
        default=False,
        description="Off: a 135M policy's activations fit; recomputing them costs a third more.",
    )
    roles: tuple[str, ...] = Field(
        default=("solver", "proposer"), description="Whose episodes to build."
    )
    proposer: ServedProposer = Field(
        default_factory=ServedProposer, description="How the run serves its proposer."
    )
    trl_config: dict[str, Any] = Field(
        default_factory=dict, description="TRL SFTConfig fields over ours (any field)."
    )
    proposer_writes: FileForm = Field(
        default="file_blocks",
        description="How the authoring episodes write files: `<file>` blocks (no JSON escaping: "
        "the embedded 135M model, taught write_file calls, left quotes in file contents "
        "unescaped, so no file reached the folder) or `write_file` calls.",
    )


def settings_for(config: RunConfig) -> ColdStartSettings:
    """The cold start a run needs: its proposer episodes read as the run serves its proposer."""
    return ColdStartSettings(
        proposer=ServedProposer(
            compact_prompt=config.proposer_compact_prompt,
            brief_examples=config.brief_examples,
            brief_file_chars=config.brief_file_chars,
            band=(config.band_low, config.band_high),
        ),
        trl_config=config.cold_start_trl_config,
    )


class RoleCount(BaseModel):
    attempted: int = 0
    kept: int = 0
    dropped: dict[str, str] = Field(default_factory=dict, description="task -> why")


class ColdStartCard(BaseModel):
    """What the dataset holds and what it cost (`card.json` next to it)."""

    fingerprint: str
    dataset_fingerprint: str = ""
    tasks_dir: str
    base_model: str
    solver: RoleCount = Field(default_factory=RoleCount)
    proposer: RoleCount = Field(default_factory=RoleCount)
    harvested: int = Field(default=0, description="Examples taken from earlier runs.")
    duplicates_dropped: int = 0
    examples: dict[str, int] = Field(default_factory=dict, description="role -> examples")
    calibration: str = NO_CALIBRATION
    settings: ColdStartSettings = Field(default_factory=ColdStartSettings)
    seconds: dict[str, float] = Field(default_factory=dict, description="phase -> seconds")
    cpu_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="phase -> CPU seconds (user + system) of the process that ran it: the cost "
        "on a shared machine, where the wall clock also counts other jobs. The replays' count "
        "leaves out the sandboxes' own processes.",
    )
    sft: dict[str, Any] = Field(
        default_factory=dict,
        description="The SFT job's metrics: loss, steps, and where its time went (seconds and "
        "tokens per role, tokens per second).",
    )
    checkpoint: str | None = None
    splits: SplitCheck | None = Field(
        default=None,
        description="The run's splits (cold start, pool seed, held-out) and the check that they "
        "share no task; the run that adopted this checkpoint wrote it.",
    )


class ColdStartTasksError(ValueError):
    """The cold start has no tasks of its own to replay: a user's configuration to change."""


def cold_start_splits(
    cold_start_tasks: str | Path | None,
    seed_dir: str | Path | None,
    heldout_dir: str | Path | None,
) -> tuple[Path, SplitCheck]:
    """The cold start's task folder and the run's split check; refuses (SplitOverlapError,
    ColdStartTasksError) a cold start that would replay the pool's seed or the held-out tasks:
    the policy would then be measured on the very tasks it was fine-tuned on."""
    if not cold_start_tasks:
        raise ColdStartTasksError(
            "the cold start needs its own tasks (--cold-start-tasks DIR): a folder sharing no "
            f"task with the pool's seed ({seed_dir}) or the held-out set ({heldout_dir or 'none'})"
        )
    check = check_splits(
        {"cold_start": cold_start_tasks, "pool_seed": seed_dir, "heldout": heldout_dir}
    )
    require_disjoint(check, "cold_start", ["pool_seed", "heldout"])
    return Path(cold_start_tasks), check


#: The settings the dataset depends on; the others only change the SFT on it.
_DATASET_FIELDS = {"roles", "proposer", "proposer_writes"}
#: Bumped when the replays record differently (2: the compact proposer is served COMPACT_TOOLS).
DATASET_VERSION = 2
#: The SFT's input: the dataset's rows, each role's repeated for its epochs, shuffled.
TRAIN_SET = "cold-start-train.jsonl"


def fingerprint(
    base_model: str, tasks_dir: Path, settings: ColdStartSettings, *, dataset: bool = False
) -> str:
    """Changes when anything the checkpoint depends on changes (`dataset`: the dataset only —
    the replays are scripted, so the policy's weights do not enter it)."""

    fields = _DATASET_FIELDS if dataset else None
    # No override is no field: a cache built before `trl_config` existed stays valid.
    unset = set() if settings.trl_config else {"trl_config"}
    blob = json.dumps(
        {
            "version": DATASET_VERSION,
            "base": None if dataset else base_model,
            "tasks": content_hash(tasks_dir),
            "prompts": _prompts_hash(),
            "settings": settings.model_dump(mode="json", include=fields, exclude=unset),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _prompts_hash() -> str:
    """The prompts' text: the episodes record what the roles were told, so a changed prompt
    is a new dataset (else round 1 serves prompts the cold start never trained on)."""

    digest = hashlib.sha256()
    for prompt in sorted(files("autoenvscaling.prompts").iterdir(), key=lambda p: p.name):
        if prompt.name.endswith(".md"):
            digest.update(prompt.name.encode() + b"\0" + prompt.read_bytes() + b"\0")
    return digest.hexdigest()


def export_row(example: SFTExample, *, run_id: str = "cold-start") -> dict[str, Any]:
    """An example as a row of `export rollouts --format jsonl` (tools/export/rollouts.py),
    plus its `source`; training/sft/data.py reads such rows back."""

    return {
        "id": example.attempt_id,
        "run_id": run_id,
        "round": 0,
        "role": example.role,
        "task_id": example.task_id,
        "policy_version": example.source,
        "model": None,
        "reward": example.reward,
        "outcome": "solved",
        "messages": wire_messages(example.messages),
        "tools": example.tools,
        "source": example.source,
    }


def task_folders(tasks_dir: Path) -> list[Path]:
    return sorted(p for p in Path(tasks_dir).iterdir() if (p / "task.toml").is_file())


async def build_dataset(
    tasks_dir: Path,
    cache: Path,
    *,
    base_model: str,
    settings: ColdStartSettings | None = None,
    backend: str = "podman",
    runs: Sequence[Path] = (),
    progress: Callable[[str], None] | None = None,
) -> ColdStartCard:
    """Replay both roles on `tasks_dir` (and harvest `runs`) into `cache/cold-start.jsonl`."""

    settings = settings or ColdStartSettings()
    say = progress or (lambda _msg: None)
    tasks = task_folders(tasks_dir)
    card = ColdStartCard(
        fingerprint=fingerprint(base_model, tasks_dir, settings),
        dataset_fingerprint=fingerprint(base_model, tasks_dir, settings, dataset=True),
        tasks_dir=str(tasks_dir),
        base_model=base_model,
        settings=settings,
    )
    store_path = cache / "rollouts.db"
    examples: list[SFTExample] = []
    if "solver" in settings.roles:
        started, cpu = time.monotonic(), _cpu()
        say(f"cold start: replaying {len(tasks)} reference solutions through the served solver")
        results, solved = await replay_tasks(
            tasks, store_path=store_path, backend=backend, trials_dir=cache / "trials"
        )
        card.solver = RoleCount(
            attempted=len(results),
            kept=len(solved),
            dropped={r.task_id: r.reason for r in results if not r.kept},
        )
        examples += solved
        card.seconds["solver_replays"] = round(time.monotonic() - started, 1)
        card.cpu_seconds["solver_replays"] = round(_cpu() - cpu, 1)
    if "proposer" in settings.roles:
        started, cpu = time.monotonic(), _cpu()
        say(f"cold start: replaying the authoring of {len(tasks)} tasks through the proposer")
        authored = await replay_authorings(
            tasks,
            pool_dir=tasks_dir,
            store_path=store_path,
            out_dir=cache / "candidates",
            backend=backend,
            served=settings.proposer,
            form=settings.proposer_writes,
            on_done=lambda r: say(f"  {r.task_id}: {'kept' if r.kept else r.reason[:120]}"),
        )
        card.proposer = RoleCount(
            attempted=len(authored),
            kept=sum(1 for r in authored if r.kept),
            dropped={r.task_id: r.reason for r in authored if not r.kept},
        )
        for result in authored:
            transcript = load_transcript(store_path, result.attempt_id or "")
            if not result.kept or transcript is None:
                continue
            last = max(i for i, m in enumerate(transcript.messages) if m["role"] == "assistant")
            examples.append(
                SFTExample(
                    messages=transcript.messages[: last + 1],  # up to its own `submit` call
                    tools=transcript.tools,
                    role="proposer",
                    task_id=result.task_id,
                    source="authoring-replay",
                    reward=1.0,
                    attempt_id=result.attempt_id or "",
                )
            )
        card.seconds["proposer_replays"] = round(time.monotonic() - started, 1)
        card.cpu_seconds["proposer_replays"] = round(_cpu() - cpu, 1)
    if runs:
        interface = await served_solver_interface()
        for run_dir in runs:
            harvest = harvest_run(
                run_dir, first_messages=interface.first_messages, solver_tools=interface.tools
            )
            card.harvested += len(harvest.examples)
            examples += harvest.examples
    examples, card.duplicates_dropped = deduplicate(examples)
    card.examples = {
        role: sum(1 for e in examples if e.role == role) for role in ("solver", "proposer")
    }
    with RolloutStore(store_path):  # the store exists even when nothing was replayed
        pass
    with (cache / DATASET).open("w", encoding="utf-8") as out:
        for example in examples:
            out.write(json.dumps(export_row(example), ensure_ascii=False) + "\n")
    (cache / CARD).write_text(card.model_dump_json(indent=2))
    return card


async def cold_start_checkpoint(
    cache: Path,
    *,
    base_model: str,
    tasks_dir: Path,
    settings: ColdStartSettings | None = None,
    backend: str | None = None,
    runs: Sequence[Path] = (),
    progress: Callable[[str], None] | None = None,
    splits: SplitCheck | None = None,
) -> tuple[Checkpoint, ColdStartCard]:
    """The cold-start checkpoint in `cache` (a registry), built once per fingerprint: the
    dataset (`build_dataset`), then SFT on it; the card records both, and the run's `splits`
    (`cold_start_splits`) when given."""

    settings = settings or ColdStartSettings()
    say = progress or (lambda _msg: None)
    cache = Path(cache)
    registry = CheckpointRegistry(cache / "registry")
    card_path = cache / CARD
    key = fingerprint(base_model, tasks_dir, settings)
    current = registry.current()
    before = (
        ColdStartCard.model_validate_json(card_path.read_text()) if card_path.is_file() else None
    )
    if before is not None and current is not None:
        if before.fingerprint == key and before.checkpoint == current.id:
            say(f"cold start: {current.id} (built before, {_cost(before)})")
            return current, before.model_copy(update={"splits": splits})
    started = time.monotonic()
    cache.mkdir(parents=True, exist_ok=True)
    data_key = fingerprint(base_model, tasks_dir, settings, dataset=True)
    if (
        before is not None
        and before.dataset_fingerprint == data_key
        and not runs
        and (cache / DATASET).is_file()
    ):
        # Only the SFT changed (steps, rank, base weights): the replays stand.
        say("cold start: the replayed dataset stands; training on it again")
        card = before.model_copy(
            update={"fingerprint": key, "settings": settings, "sft": {}, "checkpoint": None}
        )
        card.seconds = {k: v for k, v in card.seconds.items() if k.endswith("_replays")}
        card.cpu_seconds = {k: v for k, v in card.cpu_seconds.items() if k.endswith("_replays")}
    else:
        say("cold start: building it (once per machine; later runs reuse it)")
        card = await build_dataset(
            tasks_dir,
            cache,
            base_model=base_model,
            settings=settings,
            backend=backend or "podman",
            runs=runs,
            progress=say,
        )
    if not sum(card.examples.values()):
        raise TrainingError(
            f"cold start: no verified trajectory (solver dropped {card.solver.dropped}, "
            f"proposer dropped {card.proposer.dropped})"
        )
    rows = training_rows(cache / DATASET, settings.epochs)
    (cache / TRAIN_SET).write_text("".join(json.dumps(row) + "\n" for row in rows))
    steps = settings.steps or max(1, len(rows) // settings.batch_size)
    say(
        f"cold start: SFT on {card.examples} verified trajectories, epochs {settings.epochs} "
        f"({steps} steps, LoRA rank {settings.lora_rank})"
    )
    sft_started = time.monotonic()
    job = SFTJob(
        job_id=f"cold-start-{key[:8]}",
        base_model=base_model,
        dataset=cache / TRAIN_SET,
        work_dir=cache / "job",
        batch_size=settings.batch_size,
        max_length=settings.max_length,
        hyper=TrainHyperParams(
            steps=steps,
            learning_rate=settings.learning_rate,
            lora_rank=settings.lora_rank,
            lora_alpha=2 * settings.lora_rank,
            gradient_checkpointing=settings.gradient_checkpointing,
            trl_config=settings.trl_config,
        ),
    )

    def step(event: TrainProgress) -> None:
        if event.stage == "step":
            loss = event.metrics.get("loss")
            shown = f", loss {loss:.3f}" if isinstance(loss, int | float) else ""
            say(f"  SFT step {event.step}/{event.total_steps}{shown}")

    result = await TRLSFTBackend(registry).train(job, progress=step)
    if result.checkpoint is None:
        raise TrainingError(f"cold start published nothing: {result.reason}")
    card.seconds["sft"] = round(time.monotonic() - sft_started, 1)
    card.seconds["total"] = round(time.monotonic() - started, 1)
    card.sft = {k: v for k, v in result.metrics.items() if k in _SFT_METRICS}
    card.sft["steps"] = steps
    if "cpu_seconds" in result.metrics:
        card.cpu_seconds["sft"] = result.metrics["cpu_seconds"]
    card.checkpoint = result.checkpoint.id
    card.splits = splits
    card_path.write_text(card.model_dump_json(indent=2))
    if _machine_wide(cache):  # a run's or a test's own folder is that caller's work, not set-up
        record_one_time_build(f"the cold start ({card_path})")
    say(f"cold start: {result.checkpoint.id} built ({_cost(card)})")
    return result.checkpoint, card


def training_rows(dataset: Path, epochs: dict[str, int]) -> list[dict[str, Any]]:
    """The dataset's rows, each role's `epochs[role]` times (one if unnamed), in a fixed
    shuffled order: the roles interleave, so no stretch of steps trains one role alone."""
    rows = [json.loads(line) for line in dataset.read_text().splitlines() if line.strip()]
    repeated = [row for row in rows for _ in range(epochs.get(str(row.get("role")), 1))]
    random.Random(0).shuffle(repeated)
    return repeated


#: The SFT job's metrics the card keeps (training/sft/worker.py, training/sft/step_timing.py).
_SFT_METRICS = (
    "first_loss",
    "last_loss",
    "param_change_l2",
    "examples",
    "by_role",
    "device",
    "duration_sec",
    "step_seconds_by_role",
    "tokens_by_role",
    "loss_tokens_by_role",
    "tokens_per_second",
)


def _machine_wide(cache: Path) -> bool:
    """The cache every process on the machine shares (the embedded one, `make coldstart`'s)."""

    return cache.resolve().is_relative_to(embedded_cache_dir().resolve())


def _cpu() -> float:
    """This process's CPU seconds, its reaped children's included."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _cost(card: ColdStartCard) -> str:
    seconds = ", ".join(f"{k} {v:.0f} s" for k, v in card.seconds.items())
    return f"{card.examples} examples; {seconds}"


async def adopt_cold_start(
    checkpoint: Checkpoint, run_checkpoints: Path, server: PolicyServer, current: Policy
) -> Policy:
    """Put the cold-start checkpoint in the run's registry (same id) and serve it to both roles."""
    registry = CheckpointRegistry(run_checkpoints)
    if not registry.exists(checkpoint.id):
        registry.publish(
            checkpoint.path,
            base_model=checkpoint.base_model,
            kind=checkpoint.kind,
            job_id=checkpoint.job_id,
            metrics={**checkpoint.metrics, "cold_start": True},
            checkpoint_id=checkpoint.id,
        )
    return await adopt_checkpoint(registry.get(checkpoint.id), server, current)
