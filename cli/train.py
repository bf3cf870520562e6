"""`autoenvscaling train`: run the training node alone (GRPO on Harbor tasks -> a new checkpoint),
or a supervised cold start (`--sft DATASET`, TRL SFTTrainer) published the same way.

Mounted by cli/main.py. Imports no torch: training runs in the TRL worker subprocess.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ..tools.agents.solver_interface import SOLVER_MAX_TURNS
from .progress import TaskProgress

train_app = typer.Typer(help="Training commands.")
console = Console(stderr=True)


def _task_dirs(paths: list[Path]) -> list[Path]:
    """Each path is a task folder (has task.toml) or a pool of task folders."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..tools.tasks.format import TaskFormatError, load_pool

    found: list[Path] = []
    for path in paths:
        if (path / "task.toml").is_file():
            found.append(path.resolve())
            continue
        errors: list[TaskFormatError] = []
        tasks = load_pool(path, errors)
        for err in errors:
            console.print(f"[yellow]skipped[/] {err}")
        found += [t.root.resolve() for t in tasks]
    return found


def parse_trl_config(text: str | None) -> dict[str, Any]:
    """`--trl-config`: a JSON object of TRL config fields (checked against the trainer's config
    class when the job starts)."""
    try:
        fields = json.loads(text or "{}")
    except ValueError:
        fields = None
    if not isinstance(fields, dict):
        raise typer.BadParameter("a JSON object of TRL config fields", param_hint="--trl-config")
    return fields


@train_app.command("train")
def train(
    tasks: Annotated[
        list[Path],
        typer.Option("--tasks", "-t", exists=True, help="Task folder or pool folder (repeatable)."),
    ] = [],  # noqa: B006
    sft: Annotated[
        Path | None,
        typer.Option(
            "--sft",
            exists=True,
            help="Supervised cold start on this SFT dataset (sft-data's dataset/ or sft.jsonl) "
            "instead of GRPO on tasks.",
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option(help="SFT: examples per step.")] = 2,
    max_length: Annotated[int, typer.Option(help="SFT: token cap per example.")] = 2048,
    base: Annotated[
        str | None,
        typer.Option(
            "--base", help="Base model: a local HF model folder (default: the embedded policy's)."
        ),
    ] = None,
    replay: Annotated[
        list[Path], typer.Option("--replay", exists=True, help="Replay tasks (folder or pool).")
    ] = [],  # noqa: B006
    registry: Annotated[
        Path, typer.Option("--registry", help="Checkpoint registry folder.")
    ] = Path("checkpoints"),
    parent: Annotated[
        str | None,
        typer.Option(
            "--parent",
            help="Checkpoint id to continue from; default: the registry's current one; "
            "'base' = start from the base model.",
        ),
    ] = None,
    work_dir: Annotated[Path | None, typer.Option("--work-dir", help="Scratch folder.")] = None,
    steps: Annotated[int, typer.Option(help="GRPO optimizer steps.")] = 2,
    lr: Annotated[float, typer.Option("--lr", help="Learning rate.")] = 1e-4,
    num_generations: Annotated[int, typer.Option(help="Rollouts per task per step.")] = 4,
    tasks_per_step: Annotated[int, typer.Option(help="Tasks (groups) per step.")] = 2,
    max_completion_length: Annotated[
        int | None,
        typer.Option(help="Tokens per episode; default: the served episode's bound."),
    ] = None,
    max_turns: Annotated[
        int, typer.Option(help="Model calls per episode (the served solver's).")
    ] = SOLVER_MAX_TURNS,
    max_reply_tokens: Annotated[
        int, typer.Option(help="Cap on one reply (the served max_tokens).")
    ] = 1024,
    temperature: Annotated[float, typer.Option(help="Sampling temperature (as served).")] = 0.7,
    context_window: Annotated[
        int | None, typer.Option(help="The policy's context window (bounds an episode).")
    ] = None,
    lora: Annotated[
        bool, typer.Option("--lora/--full", help="LoRA adapter or full weights.")
    ] = True,
    lora_rank: Annotated[int, typer.Option(help="LoRA rank.")] = 8,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    use_vllm: Annotated[bool, typer.Option(help="Generate with vLLM (GPU).")] = False,
    vllm_mode: Annotated[str, typer.Option(help="colocate | server")] = "colocate",
    vllm_server_url: Annotated[str | None, typer.Option(help="For --vllm-mode server.")] = None,
    threads: Annotated[int | None, typer.Option(help="torch CPU threads in the trainer.")] = None,
    sandbox: Annotated[
        str, typer.Option("--sandbox", help="Episode sandboxes: podman | docker | harbor:<type>.")
    ] = "podman",
    harbor_env: Annotated[
        Path | None,
        typer.Option(
            "--harbor-env",
            help="JSON file of Harbor EnvironmentConfig fields passed through for a "
            "harbor:<type> --sandbox",
            exists=True,
        ),
    ] = None,
    timeout: Annotated[float | None, typer.Option(help="Give up after this many seconds.")] = None,
    accelerate_config: Annotated[
        str | None,
        typer.Option(
            help="Run the worker under `accelerate launch` with this config: multi_cpu | "
            "deepspeed_zero2 | deepspeed_zero3 | fsdp (training/configs/) or a path"
        ),
    ] = None,
    num_processes: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="With --accelerate-config: the number of worker processes (ranks), over the "
            "config's; a step's batch is divided among them",
        ),
    ] = None,
    trl_config: Annotated[
        str | None,
        typer.Option(
            help="Fields of TRL's trainer config over ours, as JSON (GRPOConfig; SFTConfig with "
            '--sft), e.g. \'{"save_steps": 5, "report_to": "wandb"}\'',
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Train the policy with GRPO on TASKS (or SFT on --sft DATASET) and publish a new checkpoint."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..tools.sandbox.harbor_backends import (
        HarborBackendError,
        check_stages,
        validate_backend,
    )
    from ..training.backend import (
        TrainHyperParams,
        TrainingError,
        TrainJob,
        TrainProgress,
    )
    from ..training.checkpoints import CheckpointRegistry
    from ..training.grpo.trl_backend import TRLGRPOBackend
    from ..training.worker_backend import AccelerateLauncher

    sandbox_options = json.loads(harbor_env.read_text()) if harbor_env else {}
    trl_fields = parse_trl_config(trl_config)
    try:  # before a base model is fetched or any sandbox starts
        validate_backend(sandbox, sandbox_options)
        check_stages(sandbox, ["grpo"])
    except HarborBackendError as exc:
        raise typer.BadParameter(str(exc), param_hint="--sandbox") from None
    if base is None:  # the same embedded default as `run`, as HF weights for the trainer
        # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
        from ..training.serving.embedded_setup import (
            ensure_embedded_assets,
            ensure_hf_base_model,
        )

        console.print("no --base given: training the embedded default policy (SmolLM2-135M)")
        base = str(ensure_hf_base_model(ensure_embedded_assets(with_converter=False)))
    reg = CheckpointRegistry(registry)
    if parent == "base":
        parent_ckpt = None
    elif parent is not None:
        parent_ckpt = reg.get(parent)
    else:
        parent_ckpt = reg.current()
    task_dirs, replay_dirs = _task_dirs(tasks), _task_dirs(replay)
    if sft is None and not task_dirs and not replay_dirs:
        console.print("[red]no valid task folders found (give --tasks, or --sft DATASET)[/]")
        raise typer.Exit(2)
    job_id = f"{'sft' if sft else 'train'}-{secrets.token_hex(4)}"
    job_kwargs: dict[str, Any] = dict(
        job_id=job_id,
        base_model=base,
        parent=parent_ckpt,
        task_dirs=task_dirs,
        replay_task_dirs=replay_dirs,
        sandbox_backend=sandbox,
        sandbox_options=sandbox_options,
        work_dir=(work_dir or registry / "jobs" / job_id).resolve(),
        hyper=TrainHyperParams(
            steps=steps,
            learning_rate=lr,
            num_generations=num_generations,
            tasks_per_step=tasks_per_step,
            max_completion_length=max_completion_length,
            max_turns=max_turns,
            max_reply_tokens=max_reply_tokens,
            temperature=temperature,
            context_window=context_window,
            lora=lora,
            lora_rank=lora_rank,
            seed=seed,
            device=device,  # pyright: ignore[reportArgumentType] - typer gives a str; pydantic checks it
            use_vllm=use_vllm,
            vllm_mode=vllm_mode,  # pyright: ignore[reportArgumentType] - typer gives a str; pydantic checks it
            vllm_server_base_url=vllm_server_url,
            torch_threads=threads,
            trl_config=trl_fields,
        ),
    )
    if sft is not None:
        # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
        from ..training.sft.trl_backend import SFTJob, TRLSFTBackend

        job: TrainJob = SFTJob(
            **job_kwargs, dataset=sft.resolve(), batch_size=batch_size, max_length=max_length
        )
        what = f"SFT on {sft}"
        backend_type = TRLSFTBackend
    else:
        job = TrainJob(**job_kwargs)
        backend_type = TRLGRPOBackend
        what = f"{len(task_dirs)} tasks + {len(replay_dirs)} replay"
    console.print(
        f"job {job_id}: {what}, from {parent_ckpt.id if parent_ckpt else base}; "
        f"log in {job.work_dir}"
    )

    def progress(event: TrainProgress) -> None:
        if event.stage == "step":
            reward = event.metrics.get("reward")
            loss = event.metrics.get("loss")
            if event.total_steps and bar.total != event.total_steps:
                bar.set_total(event.total_steps)
            bar.advance(status=f"loss={loss} reward={reward}")
            bar.print(f"  step {event.step}/{event.total_steps}  loss={loss}  reward={reward}")
        elif event.stage != "rewards":
            bar.status(event.stage)
            bar.print(f"  [{event.stage}] {event.message}")

    try:
        if num_processes is not None and not accelerate_config:
            raise TrainingError("--num-processes needs --accelerate-config (e.g. multi_cpu)")
        launcher = (
            AccelerateLauncher.named(accelerate_config, num_processes=num_processes)
            if accelerate_config
            else None
        )
    except TrainingError as exc:
        raise typer.BadParameter(str(exc)) from None
    backend = backend_type(reg, timeout_sec=timeout, launcher=launcher)
    try:
        with TaskProgress("train steps", total=None, quiet=as_json, console=console) as bar:
            result = asyncio.run(backend.train(job, progress))
    except TrainingError as exc:
        console.print(f"[red]training failed[/]: {exc}")
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(result.model_dump(mode="json"), indent=2))
        return
    if result.checkpoint is None:
        console.print(f"[yellow]no update[/]: {result.reason}")
    else:
        console.print(
            f"[green]published[/] {result.checkpoint.id} ({result.checkpoint.kind}) "
            f"-> {result.checkpoint.path}"
        )
    if sft is not None:
        m = result.metrics
        console.print(
            f"{m.get('examples')} examples, loss {m.get('first_loss')} -> {m.get('last_loss')}; "
            f"{result.duration_sec:.0f} s"
        )
        return
    console.print(
        f"groups {result.groups_total}, without reward variance "
        f"{result.groups_dropped_no_variance}; {result.duration_sec:.0f} s"
    )
