"""One run's lifecycle, for every face of the flywheel: `autoenvscaling run`, Studio's flywheel
graph (`langgraph dev`) and an app that embeds it.

- `open_run(values)`: the run folder and its checkpointer thread (a new run, or `resume=True`),
  the leftovers of a killed run swept, the run's policy servers started, the cold start built and
  served to both roles, the flywheel graph compiled on the run's checkpointer and, on resume, the
  policy the saved state names loaded again. It yields an `OpenRun` to stream; leaving it stops
  the servers the run started.
- `serve_policy(values, servers, ...)`: the part a graph with no `open_run` around it needs too.
  Studio's flywheel calls it from its first node (graphs/flywheel/roles.py:
  `serve_embedded_default`), so a run started there gets the same embedded server and cold start
  as one started from the command line.

`values` are the run's settings by name (graphs/config.py: `RunConfig`); None means "not given",
so a preset or the embedded default fills it in. What is wrong with them is a `RunSetupError`
that names the setting.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..tools.gate.harness import SCRATCH_PREFIX
from ..tools.rollouts.postgres import is_postgres_url, redacted
from ..tools.run_dir import RunDir
from ..tools.scratch import sweep_scratch
from ..tools.tasks.pool import Pool
from .checkpointer import SQLITE_THREAD, open_saver, run_thread
from .config import FlywheelContext, RunConfig
from .flywheel.builder import build_flywheel, checkpoint_serde
from .policy_servers import PolicyServers
from .run_policy import Notify, RunSetupError, rebind_policy, serve_policy

#: LangGraph's step limit for one invocation: a run of many rounds takes many steps.
RECURSION_LIMIT = 10_000
#: Settings that are paths: kept as strings, the form the manifest and Studio's context hold.
_PATH_SETTINGS = ("run_dir", "heldout_dir", "proposer_heldout_dir", "seed_dir")


class RunPlan(BaseModel):
    """Where a run lives and whether it goes on from a checkpoint."""

    run_dir: Path
    #: The PostgreSQL store (and checkpointer) of the run, None on SQLite in the run folder.
    store: str | None
    #: The checkpointer: graph.sqlite in the run folder, or the store's URL.
    graph_db: str
    thread: str
    #: Goes on from the run's checkpoint (False for a new run, or one killed before its first).
    resume: bool
    #: What the plan found that the person running it should know (one line each).
    notes: list[str] = []


async def has_checkpoint(graph_db: str, thread: str = SQLITE_THREAD) -> bool:
    """Whether the run's checkpointer holds a checkpoint of `thread` (a run that really
    started). A file or database that cannot be read is a RunSetupError."""
    on_postgres = is_postgres_url(graph_db)
    if not on_postgres and not Path(graph_db).is_file():
        return False
    try:
        async with open_saver(graph_db, checkpoint_serde()) as saver:
            return await saver.aget_tuple({"configurable": {"thread_id": thread}}) is not None
    except Exception as exc:  # noqa: BLE001 - a torn or foreign file: say so plainly
        if on_postgres:
            raise RunSetupError(
                f"the checkpointer at {redacted(graph_db)} cannot be read ({exc})", "store"
            ) from None
        raise RunSetupError(
            f"{graph_db} cannot be read as a run's checkpoint database ({exc}); move it away "
            "to start the run over",
            "run_dir",
        ) from None


async def plan_run(values: Mapping[str, Any], *, resume: bool = False) -> RunPlan:
    """The run folder (`values["run_dir"]`, else a new one under runs/), its store and
    checkpointer thread, and whether it resumes. A folder that holds a run needs `resume`; one
    killed before its first checkpoint starts over (every step before it is idempotent)."""
    given_dir = values.get("run_dir")
    if given_dir is None:
        if resume:
            raise RunSetupError("resuming needs the run folder of the run to continue", "run_dir")
        given_dir = Path("runs") / time.strftime("run-%Y%m%d-%H%M%S")
    run_dir = Path(given_dir).resolve()
    store: str | None = values.get("store")
    if store is not None and not is_postgres_url(store):
        raise RunSetupError(
            "takes a postgresql:// URL (the SQLite default lives in the run folder)", "store"
        )
    # A run on PostgreSQL names its database in store.json: a resume finds it without a store.
    folder = RunDir(run_dir)
    store = store or (folder.store if folder.on_postgres else None)
    graph_db = store or str(run_dir / "graph.sqlite")
    thread = run_thread(run_dir, graph_db)
    started = await has_checkpoint(graph_db, thread)
    if started and not resume:
        raise RunSetupError(
            f"{run_dir} already holds a run"
            + (f" (thread {thread} of the store's database)" if store else "")
            + ": resume it, or choose another run folder",
            "run_dir",
        )
    begun = started if store else Path(graph_db).exists()
    if resume and not begun:
        raise RunSetupError(f"nothing to resume in {run_dir}", "run_dir")
    notes = []
    if begun and not started:
        notes.append(
            f"{run_dir} holds a run stopped before its first checkpoint: starting it from the "
            "beginning (the pool and the rollouts written so far are kept)"
        )
        resume = False
    return RunPlan(
        run_dir=run_dir, store=store, graph_db=graph_db, thread=thread, resume=resume, notes=notes
    )


def sweep_leftovers(run_dir: Path) -> list[str]:
    """Remove what a killed run or gate left half done: the gate's scratch trial folders and the
    pool's half-copied tasks. Returns one line per thing removed."""
    removed = [
        f"removed {name} (left by a gate that was killed)" for name in sweep_scratch(SCRATCH_PREFIX)
    ]
    if (run_dir / "pool").is_dir():
        removed += [
            f"removed {name} (a copy a killed run left unfinished)"
            for name in Pool(run_dir / "pool").sweep()
        ]
    return removed


def run_values(values: Mapping[str, Any], plan: RunPlan) -> dict[str, Any]:
    """`values` as the run's context takes them: the planned folder and store, paths as strings,
    and who serves the policy (one rule for the command line and Studio: graphs/config.py)."""
    out = dict(values)
    out["run_dir"] = str(plan.run_dir)
    out["store"] = plan.store
    for name in _PATH_SETTINGS:
        if out.get(name) is not None:
            out[name] = str(out[name])
    out["decontam_dirs"] = [str(Path(p).resolve()) for p in out.get("decontam_dirs") or []]
    out["policy_server"] = RunConfig.from_values(out).policy_server
    return out


@dataclass
class OpenRun:
    """A run ready to stream: its graph on the run's checkpointer, the config naming its thread,
    the context its nodes run under, and what to send first (the input of a new run, None to go
    on from the checkpoint). `finished`: a resumed run with no round left to run."""

    graph: Any
    config: dict[str, Any]
    context: FlywheelContext
    payload: Any
    plan: RunPlan
    servers: PolicyServers
    finished: bool = False

    def astream(self, payload: Any = None, **kwargs: Any) -> AsyncIterator[Any]:
        """The graph's stream from `payload` (default: the run's own). Durability "sync": each
        step's checkpoint is on disk before the next starts, so a kill loses at most the step
        in flight."""
        kwargs.setdefault("stream_mode", "updates")
        return self.graph.astream(
            self.payload if payload is None else payload,
            self.config,
            context=self.context,
            durability="sync",
            **kwargs,
        )

    async def supervise[T](self, work: Awaitable[T]) -> T:
        """Run `work` while the run's policy servers are watched: a server that crashed for good
        stops it (PolicyServerCrashed)."""
        return await self.servers.supervise(work)


async def _continue(graph: Any, config: dict[str, Any], rounds: int, say: Notify) -> bool:
    """Prepare a resume. A finished run asked for more rounds goes on to the next round;
    False when there is nothing left to do."""
    snapshot = await graph.aget_state(config)
    if snapshot.next or snapshot.tasks:
        return True  # stopped mid-round: the checkpoint knows where to go on
    done = int(snapshot.values.get("round", 1)) - 1
    if rounds <= done:
        say(f"the run already finished {done} round(s); ask for more than {done} rounds to go on")
        return False
    say(f"the run finished {done} round(s): continuing with rounds {done + 1}..{rounds}")
    # Re-enter the loop where a round starts (setup -> inspect), asking for the new total.
    await graph.aupdate_state(config, {"rounds": rounds}, as_node="setup")
    return True


@asynccontextmanager
async def open_run(
    values: Mapping[str, Any] | RunConfig,
    *,
    resume: bool = False,
    notify: Notify | None = None,
    plan: RunPlan | None = None,
) -> AsyncIterator[OpenRun]:
    """Open a run of the flywheel (see the module's docstring); the policy servers it started
    stop when the block ends, an exception or a cancellation included.

        async with open_run({"run_dir": "runs/a", "rounds": 2}) as run:
            async for update in run.astream():
                print(update)
    """
    say = notify or (lambda _text: None)
    given = (
        {k: getattr(values, k) for k in values.model_fields_set}
        if isinstance(values, RunConfig)
        else dict(values)
    )
    plan = plan or await plan_run(given, resume=resume)  # the caller's, when it planned first
    for line in plan.notes:
        say(line)
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    for line in sweep_leftovers(plan.run_dir):
        say(line)
    settings = run_values(given, plan)
    rounds = RunConfig.from_values(settings).rounds
    async with PolicyServers() as servers:
        servers.notify = notify
        settings = await servers.supervise(
            serve_policy(settings, servers, resume=plan.resume, notify=notify)
        )
        context = FlywheelContext.from_values(settings).with_servers(servers)
        async with open_saver(plan.graph_db, checkpoint_serde()) as saver:
            graph = build_flywheel(checkpointer=saver)
            config = {
                "configurable": {"thread_id": plan.thread},
                "recursion_limit": RECURSION_LIMIT,
            }
            finished = False
            if plan.resume:  # the server is new: load the policy the saved state names
                saved = await graph.aget_state(config)
                name = await rebind_policy(
                    context, RunDir(plan.run_dir), saved.values.get("policy")
                )
                if name:
                    say(f"resume: the policy server loaded {name} again")
                finished = not await _continue(graph, config, rounds, say)
            yield OpenRun(
                graph=graph,
                config=config,
                context=context,
                payload=None if plan.resume else {"rounds": rounds},
                plan=plan,
                servers=servers,
                finished=finished,
            )


__all__ = [
    "OpenRun",
    "RunPlan",
    "RunSetupError",
    "open_run",
    "plan_run",
    "sweep_leftovers",
]
