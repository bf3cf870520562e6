"""The run's policy: started, cold-started, swapped in and loaded again on resume.

`serve_policy` is what every face of a run calls before round 1 (graphs/lifecycle.py: `open_run`
for the command line and apps; graphs/flywheel/roles.py for the flywheel graph Studio serves):
the embedded default's server, then the cold start served to both roles. `rebind_policy` makes
a resumed run's new server serve the checkpoint its saved state names.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..tools.run_dir import RunDir
from ..training.backend import TrainingError
from ..training.checkpoints import CheckpointRegistry
from ..training.policy import PolicySwapError
from ..training.serving.embedded_setup import ensure_embedded_assets, ensure_hf_base_model
from .cold_start.start import (
    adopt_cold_start,
    cold_start_checkpoint,
    cold_start_splits,
    settings_for,
)
from .config import REPO_SEED, RunConfig, preset
from .models import Policy
from .policy_servers import PolicyServers

if TYPE_CHECKING:
    from .config import FlywheelContext

#: Where a run says what it is doing (a console's print, a logger's info): one line each.
Notify = Callable[[str], None]


class RunSetupError(ValueError):
    """The run cannot open as asked; `setting` names the setting to change (None: no one)."""

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


async def embedded_defaults(
    servers: PolicyServers,
    notify: Notify | None = None,
    *,
    model_path: Path | None = None,
    base_model: Path | None = None,
) -> dict[str, Any]:
    """Set up (once per machine) and start the embedded policy among the run's `servers`;
    returns flywheel context values (the "embedded" preset and what the server serves).

    `model_path` / `base_model` serve and train another GGUF / HF pair (e.g. a warmed-up model).
    """

    if notify:
        notify("embedded policy: setting up (first time only) and starting the server...")
    assets = await asyncio.to_thread(ensure_embedded_assets)
    if notify:
        notify(f"  {assets.summary()}")
    ref = await servers.start_embedded(model_path or assets.model_path)
    values: dict[str, Any] = {
        "policy_model": ref.chat_model,
        "policy_base_url": ref.base_url,
        **preset("embedded"),
    }
    if servers.embedded is not None:  # the window the server was started with: one source
        values["context_window"] = servers.embedded.config.n_ctx
    if base_model is not None:
        values["base_model"] = str(base_model)
    else:
        try:
            values["base_model"] = str(await asyncio.to_thread(ensure_hf_base_model, assets))
        except Exception as exc:  # noqa: BLE001 - no torch here: the run trains nothing, and says why
            if notify:
                notify(f"  no trainable weights ({exc}); training will be skipped")
    if notify:
        notify(f"  serving {ref.model} at {ref.base_url}")
    return values


#: What the run's own embedded server decides whatever the settings say: who answers, where.
_SERVED_FACTS = ("policy_model", "policy_base_url")


async def serve_policy(
    values: Mapping[str, Any],
    servers: PolicyServers,
    *,
    resume: bool = False,
    notify: Notify | None = None,
    given: AbstractSet[str] = frozenset(),
) -> dict[str, Any]:
    """Start the run's policy among `servers` and return the settings that name it. A value of
    None in `values` is "not given" (a default or preset fills it), unless its name is in
    `given` (a context that set it to None on purpose: Studio's form, an app's context).

    The embedded default (no model, no endpoint: `RunConfig.embedded_default`) gets its server
    (set up once per machine) and the "embedded" preset under every setting given. Then the cold
    start (graphs/cold_start/start.py), when asked for, or by default for the embedded policy of
    a new run that trains and names no checkpoint: built once, served to both roles before
    round 1. A cold start that was not
    asked for and cannot be built leaves the base policy, saying why; one asked for fails the run.
    A resumed run starts no cold start: its checkpoint names its policy."""
    say = notify or (lambda _text: None)
    out = dict(values)
    embedded = RunConfig.from_values(out).embedded_default()
    if embedded:
        for key, value in (await embedded_defaults(servers, notify)).items():
            if key in _SERVED_FACTS or (out.get(key) is None and key not in given):
                out[key] = value
    asked = out.get("cold_start")
    if asked is None:  # default: the embedded policy of a new run that trains, from the base
        out["cold_start"] = (
            embedded
            and out.get("train") is not False
            and not out.get("policy_checkpoint_id")
            and not resume
        )
    if out["cold_start"] and not resume:
        try:
            out.update(await _serve_cold_start(out, embedded, servers, say))
        except TrainingError as exc:
            if asked:  # asked for: no silent fallback
                raise
            say(f"cold start: not built ({exc}); the base policy runs")
            out["cold_start"] = False
    return out


async def _serve_cold_start(
    values: dict[str, Any], embedded: bool, servers: PolicyServers, say: Notify
) -> dict[str, Any]:
    """Build (once) and serve the cold-start checkpoint; the settings that name it for both
    roles. Its card (what it holds, what it cost) is copied into the run folder.

    Where it is kept: the machine's cache for the embedded policy's own cold start (the preset's
    starter tasks: later runs reuse it), else the run folder (a run's own tasks or model)."""
    from ..training.serving.embedded_setup import embedded_cache_dir  # lazy: llama.cpp's setup

    if not values.get("base_model"):
        raise RunSetupError("a cold start needs the policy's HF weights", "base_model")
    config = RunConfig.from_values(values)
    server = servers.for_config(config)
    if server is None:
        raise RunSetupError(
            "a cold start needs a policy server that swaps checkpoints", "cold_start"
        )
    run_dir = Path(config.run_dir)
    default_tasks = preset("embedded")["cold_start_tasks"]
    tasks_given = values.get("cold_start_tasks")
    machine_wide = embedded and (tasks_given is None or str(tasks_given) == default_tasks)
    cache = embedded_cache_dir() / "cold-start" if machine_wide else run_dir / "cold-start"
    try:  # its own tasks: never the pool's seed or the held-out set
        tasks, splits = cold_start_splits(
            tasks_given, values.get("seed_dir") or REPO_SEED, config.heldout_dir
        )
    except ValueError as exc:
        raise RunSetupError(str(exc), "cold_start_tasks") from None
    started = time.monotonic()
    checkpoint, card = await cold_start_checkpoint(
        cache,
        base_model=values["base_model"],
        tasks_dir=Path(tasks),
        settings=settings_for(config),
        backend=values.get("backend"),
        progress=say,
        splits=splits,
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "cold-start-card.json").write_text(card.model_dump_json(indent=2))
    current = Policy.serving(
        config.policy_model, config.policy_base_url, config.policy_tool_choice, None
    )
    policy = await adopt_cold_start(checkpoint, run_dir / "checkpoints", server, current)
    say(
        f"  cold start: serving {checkpoint.id} to both roles "
        f"({time.monotonic() - started:.0f} s here; card: {run_dir / 'cold-start-card.json'})"
    )
    return {
        "policy_model": policy.model,
        "policy_base_url": policy.base_url,
        "policy_checkpoint_id": checkpoint.id,
        "cold_start_tasks": str(tasks),
    }


async def rebind_policy(ctx: FlywheelContext, run: RunDir, policy: Policy | None) -> str | None:
    """On resume: make the live policy server (a new process on a new port) serve the checkpoint
    the graph state names, under the same model name. Returns that name, or None when the state
    names the base model (nothing to load). Raises PolicySwapError when it cannot be served:
    resuming against a server that lacks the policy would score the wrong model."""
    if policy is None or not policy.checkpoint_id:
        return None
    server = ctx.servers.for_config(ctx)
    if server is None:
        raise PolicySwapError(
            f"the run's policy is checkpoint {policy.checkpoint_id}, but no policy server "
            f"(policy_server={ctx.policy_server}) can load it on resume; resume with the server "
            "the run started with"
        )
    checkpoint = CheckpointRegistry(run.checkpoints).get(policy.checkpoint_id)
    ref = await server.activate(checkpoint)
    if ref.chat_model != policy.model:
        raise PolicySwapError(
            f"the server serves checkpoint {checkpoint.id} as {ref.model!r}, but the run's state "
            f"names {policy.model!r}"
        )
    return ref.model


__all__ = [
    "Notify",
    "RunSetupError",
    "embedded_defaults",
    "rebind_policy",
    "serve_policy",
]
