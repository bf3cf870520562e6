"""Where a run is now, read from its LangGraph checkpointer (`graph.sqlite`) without importing
the graph.

The run's SQLite checkpointer writes one checkpoint per super-step of the flywheel (thread
`flywheel`, root namespace). The newest one says what comes next: a `branch:to:<node>` channel
for each node triggered, and `__pregel_tasks` for the fan-out's `Send`s (`propose_one`,
`admit_one`), each with its slot. Writes already stored against that checkpoint are tasks that
finished. The checkpoint's blob is msgpack; LangGraph's own serializer would rebuild the state's
models by importing them, so it is decoded here as plain data (an extension type becomes its
`(module, name, payload)`), which is all this needs. The file is opened read-only (and, with no
writer, immutable): a run in progress is never blocked or changed, a finished one not touched.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import ormsgpack
from pydantic import BaseModel, Field

from .regular_files import regular_or_absent

THREAD = "flywheel"
TaskState = Literal["running", "done", "failed", "waiting"]
#: What a task's write on these channels says about it (any other write: it finished).
_ENDED: dict[str, TaskState] = {"__error__": "failed", "__interrupt__": "waiting"}


class NodeRun(BaseModel):
    """A node of the flywheel the newest checkpoint triggered, and how far it got."""

    node: str
    slot: int | None = Field(default=None, description="A fan-out's slot (propose_one, admit_one).")
    state: TaskState = Field(
        default="running",
        description="done: its writes are stored; failed: it raised (the run stopped there); "
        "waiting: on a person (`interrupt`)",
    )

    @property
    def done(self) -> bool:
        return self.state == "done"


class GraphProgress(BaseModel):
    """The flywheel's position: its round, what runs now and since when."""

    step: int
    round: int | None = None
    rounds: int | None = None
    round_started: datetime | None = None
    checkpoint_at: datetime = Field(description="When the newest super-step was checkpointed.")
    next: list[NodeRun] = Field(default_factory=list)
    interrupted: bool = Field(default=False, description="Waiting on a person (the review).")

    @property
    def finished(self) -> bool:
        return not self.next

    @property
    def stopped(self) -> bool:
        """A node raised: the run is not going on by itself (`run --resume` continues it)."""
        return any(n.state == "failed" for n in self.next)

    @property
    def running(self) -> list[NodeRun]:
        return [n for n in self.next if n.state == "running"]


def _ext(code: int, data: bytes) -> Any:
    try:
        return ("ext", code, ormsgpack.unpackb(data, ext_hook=_ext, option=_OPTIONS))
    except ormsgpack.MsgpackDecodeError:
        return ("ext", code, None)


_OPTIONS = ormsgpack.OPT_NON_STR_KEYS


def _sends(tasks: Any) -> list[tuple[str, int | None]]:
    """(node, slot) for each `Send` in `__pregel_tasks` (ext payload [module, "Send", [node, arg]])."""
    out: list[tuple[str, int | None]] = []
    for task in tasks or []:
        if not (isinstance(task, tuple) and len(task) == 3 and isinstance(task[2], list)):
            continue
        payload = task[2]
        if len(payload) < 3 or payload[1] != "Send" or not isinstance(payload[2], list):
            continue
        node, arg = payload[2][0], payload[2][1] if len(payload[2]) > 1 else None
        fields = arg  # a plain dict, or a model: ("ext", code, [module, name, fields])
        if isinstance(arg, tuple) and len(arg) == 3 and isinstance(arg[2], list):
            fields = arg[2][2] if len(arg[2]) > 2 else None
        slot = fields.get("slot") if isinstance(fields, dict) else None
        slot = slot if isinstance(slot, int) else None
        out.append((str(node), slot))
    return out


def read_progress(graph_db: Path) -> GraphProgress | None:
    """The newest checkpoint of the run's flywheel, or None when there is none (yet)."""
    # A regular file only: SQLite would follow a link out of the run, and block on a FIFO.
    if not graph_db.is_file() or not regular_or_absent(graph_db, "-wal", "-shm"):
        return None
    # No writer (no -wal file): `immutable` reads the file as it is and creates nothing (a plain
    # read-only open of a WAL database would create -wal and -shm in a finished run's folder).
    live = Path(f"{graph_db}-wal").exists()
    uri = f"{graph_db.resolve().as_uri()}?{'mode=ro' if live else 'mode=ro&immutable=1'}"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=5)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute(
            "SELECT checkpoint_id, checkpoint, metadata FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1",
            (THREAD,),
        ).fetchone()
        if row is None:
            return None
        checkpoint_id, blob, metadata = row
        writes = conn.execute(
            "SELECT task_path, channel FROM writes "
            "WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
            (THREAD, checkpoint_id),
        ).fetchall()
    except sqlite3.Error:  # an old or foreign file: no progress to show
        return None
    finally:
        conn.close()
    state = ormsgpack.unpackb(blob, ext_hook=_ext, option=_OPTIONS)
    return _progress(state, metadata, writes)


def _progress(state: dict[str, Any], metadata: Any, writes: list[tuple[str, str]]) -> GraphProgress:
    values: dict[str, Any] = state.get("channel_values") or {}
    # A task's writes against the newest checkpoint say how it ended: LangGraph stores a task's
    # exception as an `__error__` write and a pending `interrupt` as `__interrupt__`.
    states: dict[str, TaskState] = {}
    for path, channel in writes:
        kind, _, rest = path.partition(", ")
        if kind == "~__pregel_pull":
            key = rest
        elif kind == "~__pregel_push" and rest.split(", ")[0].isdigit():
            key = f"push:{int(rest.split(', ')[0])}"
        else:
            continue
        ended = _ENDED.get(channel, "done")
        if states.get(key) in (None, "done"):  # an error or an interrupt outranks its writes
            states[key] = ended
    nodes = [
        NodeRun(node=name, state=states.get(name, "running"))
        for key in sorted(values)
        if key.startswith("branch:to:") and (name := key.removeprefix("branch:to:"))
    ]
    nodes += [
        NodeRun(node=node, slot=slot, state=states.get(f"push:{index}", "running"))
        for index, (node, slot) in enumerate(_sends(values.get("__pregel_tasks")))
    ]
    step = -1
    if isinstance(metadata, bytes | str):
        try:
            step = int(json.loads(metadata).get("step", -1))
        except (ValueError, TypeError, AttributeError):
            step = -1
    started = values.get("round_started")
    return GraphProgress(
        step=step,
        round=values.get("round") if isinstance(values.get("round"), int) else None,
        rounds=values.get("rounds") if isinstance(values.get("rounds"), int) else None,
        round_started=datetime.fromtimestamp(started, UTC)
        if isinstance(started, int | float)
        else None,
        checkpoint_at=datetime.fromisoformat(state["ts"]),
        next=nodes,
        interrupted=any(n.state == "waiting" for n in nodes),
    )
