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
from typing import Any

import ormsgpack
from pydantic import BaseModel, Field

THREAD = "flywheel"


class NodeRun(BaseModel):
    """A node of the flywheel the newest checkpoint triggered, and whether it has finished."""

    node: str
    slot: int | None = Field(default=None, description="A fan-out's slot (propose_one, admit_one).")
    done: bool = False


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
    def running(self) -> list[NodeRun]:
        return [n for n in self.next if not n.done]


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
        slot = None
        if isinstance(arg, tuple) and len(arg) == 3 and isinstance(arg[2], list):
            fields = arg[2][2] if len(arg[2]) > 2 else None
            if isinstance(fields, dict) and isinstance(fields.get("slot"), int):
                slot = fields["slot"]
        out.append((str(node), slot))
    return out


def read_progress(graph_db: Path) -> GraphProgress | None:
    """The newest checkpoint of the run's flywheel, or None when there is none (yet)."""
    if not graph_db.is_file():
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
    finished_pulls = {
        path.split(", ", 1)[1] for path, _ in writes if path.startswith("~__pregel_pull")
    }
    finished_pushes = {
        int(path.split(", ")[1])
        for path, _ in writes
        if path.startswith("~__pregel_push") and path.split(", ")[1].isdigit()
    }
    nodes = [
        NodeRun(node=name, done=name in finished_pulls)
        for key in sorted(values)
        if key.startswith("branch:to:") and (name := key.removeprefix("branch:to:"))
    ]
    nodes += [
        NodeRun(node=node, slot=slot, done=index in finished_pushes)
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
        interrupted=any(channel == "__interrupt__" for _, channel in writes),
    )
