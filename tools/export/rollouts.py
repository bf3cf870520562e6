"""Export stored attempts in the shapes other tools read.

- `atif`: one Harbor trajectory file (ATIF, validated by Harbor's own `Trajectory` model) per
  attempt, `OUT/<attempt_id>.trajectory.json`, for Harbor's viewer and trace tooling.
- `jsonl`: chat messages, one attempt a line (`messages` in the OpenAI chat format with
  `tool_calls`, `tools`: the function schemas of the role's MCP tools, plus reward and ids) — what SFT trainers and
  `tokenizer.apply_chat_template(messages, tools=tools)` read. Where the attempt has a transcript
  (tools/rollouts/transcripts.py: every message it saw, system prompt and brief included, and the
  tools as bound) the row is that conversation; otherwise it is rebuilt from the stored steps.
- `hf`: the same rows as a Hugging Face dataset saved with `save_to_disk`.

Filters (role, round, outcome, tag) are applied while streaming the store, so memory stays
bounded by one batch of attempts. A tag matches an attempt's `metadata.purpose`, `metadata.arm`
or any entry of `metadata.tags`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from harbor.models.trajectories.agent import Agent
from harbor.models.trajectories.final_metrics import FinalMetrics
from harbor.models.trajectories.observation import Observation
from harbor.models.trajectories.observation_result import ObservationResult
from harbor.models.trajectories.step import Step as AtifStep
from harbor.models.trajectories.tool_call import ToolCall
from harbor.models.trajectories.trajectory import Trajectory as Atif
from pydantic import BaseModel, Field

from ..rollouts.models import Outcome, Role, Trajectory
from ..rollouts.store import RolloutStore
from ..rollouts.transcripts import load_transcript

Format = Literal["atif", "jsonl", "hf"]
AGENT_NAME = "autoenvscaling"


class RolloutFilter(BaseModel):
    role: Role | None = None
    round: int | None = None
    outcome: Outcome | None = None
    tag: str | None = None
    attempts: list[str] | None = None  # these attempt ids only (the round report's selection)

    def accepts(self, trajectory: Trajectory) -> bool:
        attempt = trajectory.attempt
        if self.attempts is not None and attempt.id not in self.attempts:
            return False
        if self.round is not None and attempt.round != self.round:
            return False
        if self.outcome is not None and attempt.outcome != self.outcome:
            return False
        if self.tag is not None:
            meta = attempt.metadata
            tags = {str(meta.get("purpose", "")), str(meta.get("arm", ""))}
            tags.update(str(t) for t in meta.get("tags", []) or [])
            if self.tag not in tags:
                return False
        return True


class RolloutExport(BaseModel):
    format: Format
    path: str
    attempts: int = Field(description="Attempts written.")


def _instruction(task_dirs: Sequence[Path], task_id: str) -> str | None:
    for root in task_dirs:
        path = root / task_id / "instruction.md"
        if path.is_file():
            return path.read_text(encoding="utf-8", errors="replace")
    return None


def chat_messages(trajectory: Trajectory, instruction: str | None) -> list[dict[str, Any]]:
    """The attempt as OpenAI-style chat messages (arguments as JSON strings, as the API sends)."""
    attempt = trajectory.attempt
    user = instruction or f"(instruction of task {attempt.task_id} not found in the run folder)"
    messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
    for step in trajectory.steps:
        message: dict[str, Any] = {"role": "assistant", "content": step.message or ""}
        if step.tool_name:
            call_id = f"call_{step.index}"
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": step.tool_name,
                        "arguments": json.dumps(step.tool_args or {}),
                    },
                }
            ]
            messages.append(message)
            messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": step.tool_output or ""}
            )
        else:
            messages.append(message)
    return messages


def wire_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Transcript (chat-template) messages in the wire form the other rows use: tool-call
    arguments as JSON strings (training/chat_format.py `wire_to_template` reverses it)."""
    out = []
    for message in messages:
        entry = dict(message)
        if entry.get("tool_calls"):
            entry["tool_calls"] = [
                {**call, "function": {**call["function"], "arguments": _json_args(call)}}
                for call in entry["tool_calls"]
            ]
        out.append(entry)
    return out


def _json_args(call: dict[str, Any]) -> str:
    arguments = call["function"].get("arguments")
    return arguments if isinstance(arguments, str) else json.dumps(arguments or {})


def atif_trajectory(
    trajectory: Trajectory,
    instruction: str | None,
    model: str | None,
    tools: Sequence[dict[str, Any]] = (),
) -> Any:
    """The attempt as Harbor's ATIF `Trajectory` (validated on construction)."""
    attempt = trajectory.attempt
    steps = [
        AtifStep(
            step_id=1,
            source="user",
            message=instruction or f"(instruction of task {attempt.task_id} not found)",
        )
    ]
    for step in trajectory.steps:
        calls = observation = None
        if step.tool_name:
            call_id = f"call_{step.index}"
            calls = [
                ToolCall(
                    tool_call_id=call_id,
                    function_name=step.tool_name,
                    arguments=step.tool_args or {},
                )
            ]
            observation = Observation(
                results=[
                    ObservationResult(
                        source_call_id=call_id,
                        content=step.tool_output or "",
                        extra={"exit_code": step.exit_code, "output_bytes": step.output_bytes},
                    )
                ]
            )
        steps.append(
            AtifStep(
                step_id=len(steps) + 1,
                source="agent",
                model_name=model,
                message=step.message or "",
                tool_calls=calls,
                observation=observation,
            )
        )
    return Atif(
        session_id=attempt.run_id or attempt.id,
        trajectory_id=attempt.id,
        agent=Agent(
            name=AGENT_NAME,
            version=attempt.policy_version or "base",
            model_name=model,
            tool_definitions=list(tools) or None,
        ),
        steps=steps,
        final_metrics=FinalMetrics(
            total_prompt_tokens=attempt.prompt_tokens,
            total_completion_tokens=attempt.completion_tokens,
            total_cost_usd=attempt.cost,
            total_steps=len(steps),
        ),
        extra={
            "task_id": attempt.task_id,
            "role": attempt.role,
            "round": attempt.round,
            "reward": attempt.reward,
            "outcome": attempt.outcome,
            "policy_version": attempt.policy_version,
        },
    )


def _rows(
    store: RolloutStore,
    where: RolloutFilter,
    task_dirs: Sequence[Path],
    tools: Mapping[str, Sequence[dict[str, Any]]],
) -> Iterator[dict[str, Any]]:
    for trajectory in store.iter_trajectories(role=where.role):
        if not where.accepts(trajectory):
            continue
        attempt = trajectory.attempt
        used = {s.tool_name for s in trajectory.steps if s.tool_name}
        schemas = list(tools.get(attempt.role, ()))
        known = {t["function"]["name"] for t in schemas}
        schemas += [
            {"type": "function", "function": {"name": n, "description": "", "parameters": {}}}
            for n in sorted(used - known)  # a tool the role's servers no longer list
        ]
        transcript = load_transcript(store.location, attempt.id)
        if transcript is not None:
            messages, schemas = wire_messages(transcript.messages), transcript.tools
        else:
            messages = chat_messages(trajectory, _instruction(task_dirs, attempt.task_id))
        yield {
            "id": attempt.id,
            "run_id": attempt.run_id,
            "round": attempt.round,
            "role": attempt.role,
            "task_id": attempt.task_id,
            "policy_version": attempt.policy_version,
            "model": attempt.metadata.get("model"),
            "reward": attempt.reward,
            "outcome": attempt.outcome,
            "messages": messages,
            "tools": schemas,
        }


def export_rollouts(
    store_path: Path | str,
    out: Path,
    *,
    fmt: Format,
    where: RolloutFilter | None = None,
    task_dirs: Sequence[Path] = (),
    tools: Mapping[str, Sequence[dict[str, Any]]] | None = None,
) -> RolloutExport:
    """Write the attempts `where` accepts to `out` in `fmt` (see the module docstring)."""
    where = where or RolloutFilter()
    tools = tools or {}
    out = Path(out)
    count = 0
    with RolloutStore(store_path) as store:
        if fmt == "atif":
            out.mkdir(parents=True, exist_ok=True)
            for trajectory in store.iter_trajectories(role=where.role):
                if not where.accepts(trajectory):
                    continue
                attempt = trajectory.attempt
                atif = atif_trajectory(
                    trajectory,
                    _instruction(task_dirs, attempt.task_id),
                    attempt.metadata.get("model"),
                    tools.get(attempt.role, ()),
                )
                path = out / f"{attempt.id}.trajectory.json"
                path.write_text(json.dumps(atif.to_json_dict(), indent=2, ensure_ascii=False))
                count += 1
        elif fmt == "jsonl":
            out.parent.mkdir(parents=True, exist_ok=True)
            with out.open("w", encoding="utf-8") as handle:
                for row in _rows(store, where, task_dirs, tools):
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                    count += 1
        else:
            import datasets

            rows = [
                {**row, "messages": json.dumps(row["messages"]), "tools": json.dumps(row["tools"])}
                for row in _rows(store, where, task_dirs, tools)
            ]
            count = len(rows)
            # messages/tools as JSON strings: one schema for every row whatever the tool args.
            datasets.Dataset.from_list(rows).save_to_disk(str(out))
    return RolloutExport(format=fmt, path=str(out), attempts=count)
