"""Verified trajectories as SFT data, in exactly the interface the roles are served with.

Three sources, one example format (chat messages + tool schemas, what a chat template renders):
- **seed replays**: a task's reference `solve.sh`, split into its top-level commands, each issued
  by the served solver as one terminal `run` tool call in a real sandbox (the replay module in
  graphs/ drives it); kept only when the task's verifier gives 1.0.
- **run folders**: solved solver attempts (reward 1.0) rebuilt from the rollout store, and
  admitted proposer attempts from their transcripts (tools/rollouts/transcripts.py).
- deduplicated on the rendered conversation (ids and timings left out).

Exports: JSONL (`messages`, `tools` as JSON objects) and a Hugging Face dataset whose `messages`
and `tools` use the `Json` feature, so nested tool-call arguments and JSON schemas round-trip
exactly (Arrow structs would add `null` keys the template then renders). TRL's SFTTrainer reads
either unchanged. No torch here.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ...tools.rollouts.models import Step
from ...tools.rollouts.store import RolloutStore
from ...tools.rollouts.transcripts import load_transcript, normalized
from ...tools.run_dir import RunDir
from ...tools.tasks.format import TaskFormatError, load_task
from ..chat_format import wire_to_template

SOLUTION_MOUNT = "/solution/"
INLINED_DIR = "/tmp/solution/"
"""Where a replay writes the solution's helper files (the solver never sees /solution)."""
_SET_FLAGS = re.compile(r"^set(\s+(-[euxo]+|-o\s+pipefail|\+[euxo]+|pipefail))+\s*$")
_SOLUTION_REF = re.compile(r"/solution/([A-Za-z0-9._-][A-Za-z0-9._/-]*)")


class NotReplayableError(ValueError):
    """A reference solution that cannot be replayed as terminal commands; says why."""


class ScriptStep(BaseModel):
    """One top-level command of a script and the comment lines right above it."""

    comment: str = ""
    command: str


class ReplayPlan(BaseModel):
    """What the replaying solver says and runs, in order, then its closing summary."""

    task_id: str
    steps: list[ScriptStep]
    summary: str
    notes: list[str] = Field(default_factory=list, description="What was changed and why.")


class SFTExample(BaseModel):
    """One training conversation: what the model saw and said, ending on its last reply."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    role: Literal["solver", "proposer"]
    task_id: str
    source: str = Field(description="seed-replay | run")
    reward: float
    attempt_id: str = ""

    def key(self) -> str:
        """Dedup key: the conversation as the template sees it (no ids) plus the tools."""
        blob = json.dumps(
            {"m": normalized(self.messages), "t": self.tools}, sort_keys=True, ensure_ascii=False
        )
        return hashlib.sha256(blob.encode()).hexdigest()


# -- splitting a script into terminal commands ----------------------------------------------------


def _complete(chunk: str) -> bool:
    """bash itself decides whether `chunk` is whole (open heredocs and blocks warn or fail)."""
    stripped = chunk.rstrip("\n")
    if (len(stripped) - len(stripped.rstrip("\\"))) % 2 == 1:  # a line continuation
        return False
    proc = subprocess.run(
        ["bash", "-n"], input=chunk, capture_output=True, text=True, timeout=30, check=False
    )
    return proc.returncode == 0 and not proc.stderr.strip()


def split_script(text: str) -> list[ScriptStep]:
    """The top-level commands of a bash script, each with the comment block just above it."""
    lines = text.splitlines()
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    steps: list[ScriptStep] = []
    comment: list[str] = []
    chunk: list[str] = []
    for line in lines:
        if not chunk:
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith("#"):
                comment.append(stripped.lstrip("#").strip())
                continue
        chunk.append(line)
        body = "\n".join(chunk) + "\n"
        if _complete(body):
            steps.append(
                ScriptStep(comment=" ".join(c for c in comment if c), command=body.strip())
            )
            comment, chunk = [], []
    if chunk:
        raise NotReplayableError(
            "the script does not parse as complete bash commands (bash -n): " + chunk[0][:80]
        )
    return steps


def replay_plan(task_dir: Path) -> ReplayPlan:
    """solve.sh as the commands a solver would type: `set -e`-style lines dropped (a persistent
    shell must survive a failing command), helper files under /solution/ written out by the
    solver itself first (it cannot read /solution), the header comment as its opening plan."""
    task_dir = Path(task_dir)
    script = task_dir / "solution" / "solve.sh"
    if not script.is_file():
        raise NotReplayableError(f"{task_dir.name}: no solution/solve.sh")
    steps = split_script(script.read_text(encoding="utf-8"))
    notes: list[str] = []
    kept: list[ScriptStep] = []
    carry = ""
    for step in steps:
        if _SET_FLAGS.match(step.command):
            notes.append(f"dropped `{step.command}` (shell options would outlive the command)")
            carry = " ".join(x for x in (carry, step.comment) if x)
            continue
        comment = " ".join(x for x in (carry, step.comment) if x)
        kept.append(step.model_copy(update={"comment": comment}))
        carry = ""
    if not kept:
        raise NotReplayableError(f"{task_dir.name}: solve.sh has no commands")
    kept = _inline_solution_files(task_dir, kept, notes)
    header = kept[0].comment
    if header.lower().startswith("reference solution:"):
        header = header.split(":", 1)[1].strip()
        kept[0] = kept[0].model_copy(update={"comment": header})
    summary = f"Done: {header}" if header else "Done: every step ran and the result is in place."
    return ReplayPlan(task_id=task_dir.name, steps=kept, summary=summary, notes=notes)


def _inline_solution_files(
    task_dir: Path, steps: list[ScriptStep], notes: list[str]
) -> list[ScriptStep]:
    names: list[str] = []
    for step in steps:
        for name in _SOLUTION_REF.findall(step.command):
            if name not in names:
                names.append(name)
    if not names:
        return steps
    writes: list[ScriptStep] = []
    for name in names:
        path = task_dir / "solution" / name
        if not path.is_file() or ".." in Path(name).parts:
            raise NotReplayableError(f"{task_dir.name}: solve.sh uses /solution/{name}, not a file")
        try:
            content = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise NotReplayableError(
                f"{task_dir.name}: /solution/{name} is binary; a terminal replay cannot type it"
            ) from None
        delimiter = "AES_EOF"
        while delimiter in content:
            delimiter += "_"
        if not content.endswith("\n"):
            content += "\n"
        target = INLINED_DIR + name
        folder = target.rsplit("/", 1)[0]
        writes.append(
            ScriptStep(
                comment=f"First write {name}, which the steps below use.",
                command=f"mkdir -p {folder} && cat > {target} <<'{delimiter}'\n{content}{delimiter}",
            )
        )
        notes.append(f"/solution/{name} written by the solver to {target}")
    rewritten = [
        s.model_copy(update={"command": s.command.replace(SOLUTION_MOUNT, INLINED_DIR)})
        for s in steps
    ]
    # The plan (header comment) stays the opening message.
    writes[0] = writes[0].model_copy(
        update={"comment": " ".join(x for x in (rewritten[0].comment, writes[0].comment) if x)}
    )
    rewritten[0] = rewritten[0].model_copy(update={"comment": ""})
    return writes + rewritten


# -- rendering: rollout-store steps -> chat messages ----------------------------------------------


def solver_messages(first: Sequence[dict[str, Any]], steps: Sequence[Step]) -> list[dict[str, Any]]:
    """A solver attempt as chat messages: its first messages (system prompt and task, as the
    served solver starts), then its stored steps.

    One assistant turn per step (the served loop's replays and small models make one call a
    turn); a step without a tool call is a closing reply. Tool results are the stored text the
    model was shown.
    """
    messages: list[dict[str, Any]] = [dict(m) for m in first]
    for step in steps:
        if step.tool_name is None:
            messages.append({"role": "assistant", "content": step.message or ""})
            continue
        call_id = f"call_{step.index}"
        messages.append(
            {
                "role": "assistant",
                "content": step.message or "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": step.tool_name, "arguments": step.tool_args or {}},
                    }
                ],
            }
        )
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call_id,
                "name": step.tool_name,
                "content": step.tool_output or "",
            }
        )
    return messages


def solver_example(
    store: RolloutStore,
    attempt_id: str,
    *,
    first: Sequence[dict[str, Any]],
    tools: list[dict[str, Any]],
    source: str,
) -> SFTExample | None:
    """The attempt as an example when it scored 1.0 and ends on a reply of the model's own."""
    trajectory = store.trajectory(attempt_id)
    attempt = trajectory.attempt
    if attempt.reward is None or attempt.reward < 1.0:
        return None
    messages = solver_messages(first, trajectory.steps)
    if messages[-1]["role"] != "assistant":
        return None  # ended on a tool result (budget): no closing reply to learn
    return SFTExample(
        messages=messages,
        tools=tools,
        role="solver",
        task_id=attempt.task_id,
        source=source,
        reward=attempt.reward,
        attempt_id=attempt.id,
    )


# -- run folders ----------------------------------------------------------------------------------


class RunHarvest(BaseModel):
    examples: list[SFTExample] = Field(default_factory=list)
    skipped: dict[str, str] = Field(default_factory=dict, description="attempt id -> why")


def harvest_run(
    run_dir: Path,
    *,
    first_messages: Callable[[str], list[dict[str, Any]]],
    solver_tools: list[dict[str, Any]],
) -> RunHarvest:
    """Solved solver attempts and admitted proposer attempts of one run folder."""
    run = RunDir(Path(run_dir))
    store_path = run.store  # rollouts.db, or the run's PostgreSQL URL (store.json)
    out = RunHarvest()
    if not run.has_store:
        return out
    with RolloutStore(store_path, read_only=True) as store:
        for trajectory in store.iter_trajectories():
            attempt = trajectory.attempt
            if attempt.reward is None or attempt.reward < 1.0:
                continue
            if attempt.role == "proposer":
                transcript = load_transcript(store_path, attempt.id)
                if transcript is None:
                    out.skipped[attempt.id] = "admitted proposer attempt without a transcript"
                    continue
                if transcript.messages[-1]["role"] != "assistant":
                    transcript.messages = _trim_to_last_reply(transcript.messages)
                out.examples.append(
                    SFTExample(
                        messages=transcript.messages,
                        tools=transcript.tools,
                        role="proposer",
                        task_id=attempt.task_id,
                        source="run",
                        reward=attempt.reward,
                        attempt_id=attempt.id,
                    )
                )
                continue
            task_dir = _find_task(run_dir, attempt.task_id)
            if task_dir is None:
                out.skipped[attempt.id] = f"task {attempt.task_id} is not in the run's pool"
                continue
            try:
                instruction = load_task(task_dir).instruction
            except TaskFormatError as exc:
                out.skipped[attempt.id] = f"task {attempt.task_id} does not load: {exc}"
                continue
            example = solver_example(
                store,
                attempt.id,
                first=first_messages(instruction),
                tools=solver_tools,
                source="run",
            )
            if example is None:
                out.skipped[attempt.id] = "ends on a tool result, not a reply"
            else:
                out.examples.append(example)
    return out


def _trim_to_last_reply(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A proposer conversation ends at `submit`'s result; train up to its last own reply."""
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return messages[: last + 1]


def _find_task(run_dir: Path, task_id: str) -> Path | None:
    for candidate in (run_dir / "pool" / task_id, *run_dir.glob(f"candidates/*/{task_id}")):
        if (candidate / "task.toml").is_file():
            return candidate
    return None


# -- dedup and export -----------------------------------------------------------------------------


def deduplicate(examples: Iterable[SFTExample]) -> tuple[list[SFTExample], int]:
    """First of each rendered conversation wins; returns (kept, number dropped)."""
    seen: set[str] = set()
    kept: list[SFTExample] = []
    dropped = 0
    for example in examples:
        key = example.key()
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        kept.append(example)
    return kept, dropped


def write_jsonl(examples: Sequence[SFTExample], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for example in examples:
            out.write(json.dumps(example.model_dump(mode="json"), ensure_ascii=False) + "\n")
    return path


def read_jsonl(path: Path) -> list[SFTExample]:
    """Examples from `write_jsonl`'s file or from `export rollouts --format jsonl`'s (the
    cold-start dataset is one: graphs/cold_start/start.py)."""
    rows = [
        json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line
    ]
    return [
        SFTExample.model_validate(row) if "attempt_id" in row else example_from_export(row)
        for row in rows
    ]


def example_from_export(row: dict[str, Any], *, source: str = "export") -> SFTExample:
    """A row of `export rollouts --format jsonl` (tools/export/rollouts.py) as an example: its
    wire messages (arguments as JSON strings) in the form the chat template renders."""
    if row.get("reward") is None:
        raise ValueError(f"attempt {row.get('id')} has no reward: not a verified trajectory")
    return SFTExample(
        messages=wire_to_template(row["messages"]),
        tools=row["tools"],
        role=row["role"],
        task_id=row["task_id"],
        source=row.get("source") or source,
        reward=row["reward"],
        attempt_id=row["id"],
    )


def to_hf_dataset(examples: Sequence[SFTExample]) -> Any:
    """A `datasets.Dataset` with `messages` and `tools` as JSON values (exact round trip)."""
    import datasets

    features = datasets.Features(
        {
            "messages": datasets.List(datasets.Json()),
            "tools": datasets.List(datasets.Json()),
            "role": datasets.Value("string"),
            "task_id": datasets.Value("string"),
            "source": datasets.Value("string"),
            "reward": datasets.Value("float64"),
            "attempt_id": datasets.Value("string"),
        }
    )
    rows = [example.model_dump(mode="json") for example in examples]
    return datasets.Dataset.from_list(rows, features=features)


def load_sft_dataset(path: Path) -> Any:
    """A dataset folder (`save_to_disk`) or a JSONL file, as a `datasets.Dataset`."""
    path = Path(path)
    if path.is_dir():
        import datasets

        return datasets.load_from_disk(str(path))
    return to_hf_dataset(read_jsonl(path))
