"""Glue between the flywheel's nodes and the policy server both roles call, for a run that
nothing opened (Studio, an app passing `FlywheelContext()`): start it as `open_run` would, stop it.

Kept apart from graphs/flywheel/nodes.py so the graph file shows only the loop. Both roles' training
is graphs/flywheel/training.py; the proposer and its admission are in graphs/flywheel/admission.py.
"""

from __future__ import annotations

import logging
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from ...tools.run_dir import RunDir
from ..models import Policy
from ..policy_servers import PolicyServers
from ..run_policy import rebind_policy, serve_policy

if TYPE_CHECKING:
    from ..config import FlywheelContext

logger = logging.getLogger(__name__)


async def serve_embedded_default(ctx: FlywheelContext, policy: Policy | None) -> FlywheelContext:
    """The context a node runs under. When `ctx` is the embedded default (no model, no endpoint:
    `embedded_default()`) and nothing started its server — the flywheel served by `langgraph dev`
    with its default context, an app passing `FlywheelContext()` — the graph starts the embedded
    server once per run (the first node that runs) and returns `ctx` resolved as `autoenvscaling
    run` resolves it (graphs/run_policy.py: `serve_policy`): served at the new endpoint, the
    "embedded" preset under every setting the context sets itself, and the cold start served to
    both roles when the run asks for it (by default when it trains). A run resumed in a new
    process (an interrupt, a crash) gets a new server that loads the checkpoint `policy` names
    (`rebind_policy`), and no cold start. Every other context is returned as it is (the CLI or
    an app opened the run: graphs/lifecycle.py).

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
        servers = PolicyServers()
        try:
            given = ctx.model_fields_set
            settings = await serve_policy(
                {name: getattr(ctx, name) for name in given},
                servers,
                resume=policy is not None,
                notify=logger.info,
                given=given,
            )
            # What the context set stays as it set it, None included (from_values would drop it).
            fields = type(ctx).model_fields
            kept = {
                k: v for k, v in settings.items() if k in fields and (v is not None or k in given)
            }
            served = type(ctx).model_validate(kept).with_servers(servers)
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
