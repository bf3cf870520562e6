"""Glue between the flywheel's nodes and the policy server both roles call: start it, rebind
it on resume, stop it.

Kept apart from graphs/flywheel.py so the graph file shows only the loop. Both roles' training
is graphs/role_training.py; the proposer and its admission are in graphs/admission.py.
"""

from __future__ import annotations

import asyncio
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..tools.run_dir import RunDir
from .config import preset
from .models import Policy

if TYPE_CHECKING:
    from rich.console import Console

    from .config import FlywheelContext
    from .policy_servers import PolicyServers


async def embedded_defaults(
    servers: PolicyServers,
    console: Console | None = None,
    *,
    model_path: Path | None = None,
    base_model: Path | None = None,
) -> dict[str, Any]:
    """Set up (once per machine) and start the embedded policy among the run's `servers`;
    returns flywheel context values (the "embedded" preset and what the server serves).

    `model_path` / `base_model` serve and train another GGUF / HF pair (e.g. a warmed-up model).
    """
    from ..training.serving.embedded_setup import ensure_embedded_assets

    if console:
        console.print("embedded policy: setting up (first time only) and starting the server...")
    assets = await asyncio.to_thread(ensure_embedded_assets)
    if console:
        console.print(f"  {assets.summary()}")
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
        from ..training.serving.embedded_setup import ensure_hf_base_model

        try:
            values["base_model"] = str(await asyncio.to_thread(ensure_hf_base_model, assets))
        except Exception as exc:  # noqa: BLE001 - no torch here: the run trains nothing, and says why
            if console:
                console.print(
                    f"  [yellow]no trainable weights ({exc}); training will be skipped[/]"
                )
    if console:
        console.print(f"  serving {ref.model} at {ref.base_url}")
    return values


#: What the graph's own embedded server decides whatever the context says: who answers, where.
_SERVED_FACTS = ("policy_model", "policy_base_url")


async def serve_embedded_default(ctx: FlywheelContext, policy: Policy | None) -> FlywheelContext:
    """The context a node runs under. When `ctx` is the embedded default (no model, no endpoint:
    `embedded_default()`) and nothing started its server — the flywheel served by `langgraph dev`
    with its default context, an app passing `FlywheelContext()` — the graph starts the embedded
    server once per run (the first node that runs) and returns `ctx` resolved as `autoenvscaling
    run` resolves it: served at the new endpoint, the "embedded" preset under every setting the
    context sets itself. A run resumed in a new process (an interrupt, a crash) gets a new server
    that loads the checkpoint `policy` names (`rebind_policy`). Every other context is returned
    as it is (the CLI started its server and named the endpoint).

    The server is the run's: `release_embedded_default` stops it when the run finishes or pauses
    for review; a run that fails leaves it to the context's finalizer (when the run lets go of
    its context) and, at the latest, to this process's exit (the server also ends with it).

    Raises PolicyServerCrashed when the run's server crashed for good: no node starts then."""
    (ctx.served or ctx).servers.raise_if_down()
    if ctx.served is not None:
        return ctx.served
    if not ctx.embedded_default():
        return ctx
    async with ctx.serving_lock:
        if ctx.served is not None:  # a parallel branch started it first
            return ctx.served
        from .policy_servers import PolicyServers

        servers = PolicyServers()
        try:
            values = await embedded_defaults(servers)
            given = ctx.model_fields_set
            update = {k: v for k, v in values.items() if k in _SERVED_FACTS or k not in given}
            served = ctx.model_copy(update=update).with_servers(servers)
            served.serve_with(None)
            await rebind_policy(served, RunDir(Path(served.run_dir)), policy)
        except BaseException:
            await servers.aclose()
            raise
        ctx.serve_with(served)
        weakref.finalize(ctx, servers.close)
    return served


async def release_embedded_default(ctx: FlywheelContext) -> None:
    """Stop the server `serve_embedded_default` started for `ctx`'s run (nothing otherwise)."""
    served = ctx.served
    if served is not None:
        ctx.serve_with(None)
        await served.servers.aclose()


async def rebind_policy(ctx: FlywheelContext, run: RunDir, policy: Policy | None) -> str | None:
    """On resume: make the live policy server (a new process on a new port) serve the checkpoint
    the graph state names, under the same model name. Returns that name, or None when the state
    names the base model (nothing to load). Raises PolicySwapError when it cannot be served:
    resuming against a server that lacks the policy would score the wrong model."""
    if policy is None or not policy.checkpoint_id:
        return None
    from ..training.checkpoints import CheckpointRegistry
    from ..training.policy import PolicySwapError

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


__all__ = ["embedded_defaults", "rebind_policy"]
