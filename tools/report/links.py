"""The round report's per-candidate links: its folder, its verdicts, the trial folders the gate
ran for it, and its rollouts.

Links are relative to the report's folder (`reports/`), so the run folder can be moved or shared
as a whole. Trial folders come from the verdicts themselves: every gate stage records the
`trial_dir` of each trial it ran (tools/gate: build, oracle and its reruns, nop, repeat, every
anti-cheat probe, every calibration rollout), so a candidate links exactly the trials run for it.
Rollouts are the store's attempt ids (the proposer's, then each calibration rollout's) and the
`export rollouts` command line that selects them.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .metrics import CandidateRecord


class CandidateLinks(BaseModel):
    task_id: str
    admitted: bool
    stage: str | None = None
    reason: str = ""
    folder: str | None = Field(default=None, description="The candidate's task folder, relative.")
    verdict: str | None = Field(default=None, description="Its admission verdict JSON, relative.")
    precheck: str | None = Field(
        default=None, description="The proposer's last gate run, relative."
    )
    trials: list[str] = Field(default_factory=list, description="Trial folders, relative.")
    attempts: list[str] = Field(
        default_factory=list, description="Rollout ids: the proposer's, then calibration's."
    )
    export: str | None = Field(
        default=None, description="`export rollouts` selecting those attempts."
    )


def verdict_files(candidate: Path) -> tuple[Path, Path]:
    """(verdict.json, precheck.json) stored next to a candidate folder (graphs/admission)."""
    return (
        candidate.parent / f"{candidate.name}.verdict.json",
        candidate.parent / f"{candidate.name}.precheck.json",
    )


def _walk(value: Any, key: str) -> Iterator[Any]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == key:
                yield v
            yield from _walk(v, key)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, key)


def _stages(path: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads(path.read_text()).get("stages") or [])
    except (OSError, ValueError):
        return []


def trial_dirs(stages: Iterable[dict[str, Any]]) -> list[Path]:
    """Every trial folder a verdict's stages name, in stage order, once each."""
    seen: dict[Path, None] = {}
    for stage in stages:
        for found in _walk(stage.get("details") or {}, "trial_dir"):
            if isinstance(found, str) and found:
                seen.setdefault(Path(found), None)
    return list(seen)


def calibration_attempts(stages: Iterable[dict[str, Any]]) -> list[str]:
    out = []
    for stage in stages:
        if stage.get("stage") == "calibrate":
            out += [
                a["attempt_id"]
                for a in stage.get("details", {}).get("attempts") or []
                if a.get("attempt_id")
            ]
    return out


def candidate_links(record: CandidateRecord, run_root: Path, report_dir: Path) -> CandidateLinks:
    """What the report links for one candidate; only paths that exist are linked."""

    def rel(path: Path) -> str | None:
        return os.path.relpath(path, report_dir) if path.exists() else None

    candidate = Path(record.path)
    verdict, precheck = verdict_files(candidate)
    stages = [*_stages(precheck), *_stages(verdict)]
    trials = [r for p in trial_dirs(stages) if (r := rel(p)) is not None]
    attempts = [a for a in [record.attempt_id, *calibration_attempts(_stages(verdict))] if a]
    attempts = list(dict.fromkeys(attempts))
    export = (
        "autoenvscaling export rollouts "
        + shlex.quote(str(run_root))
        + "".join(f" --attempt {shlex.quote(a)}" for a in attempts)
        if attempts
        else None
    )
    return CandidateLinks(
        task_id=record.task_id,
        admitted=record.admitted,
        stage=record.stage,
        reason=record.reason,
        folder=rel(candidate),
        verdict=rel(verdict),
        precheck=rel(precheck),
        trials=trials,
        attempts=attempts,
        export=export,
    )


def _link(target: str, label: str | None = None) -> str:
    return f"[{label or target}](<{target}>)"


def links_markdown(links: Iterable[CandidateLinks]) -> str:
    """The report's "Candidates" section."""
    lines = ["## Candidates", ""]
    for c in links:
        state = "admitted" if c.admitted else f"rejected at {c.stage or '-'}"
        lines += [f"### {c.task_id}: {state}", ""]
        if c.reason:
            lines += [f"{' '.join(c.reason.split())[:300]}", ""]
        if c.folder:
            lines.append(f"- task folder: {_link(c.folder)}")
        if c.verdict:
            lines.append(f"- verdict: {_link(c.verdict)}")
        if c.precheck:
            lines.append(f"- the proposer's last gate run: {_link(c.precheck)}")
        if c.trials:
            shown = ", ".join(_link(t, "/".join(Path(t).parts[-3:])) for t in c.trials)
            lines.append(f"- trial folders ({len(c.trials)}): {shown}")
        else:
            lines.append("- trial folders: none kept")
        if c.attempts:
            ids = ", ".join(f"`{a}`" for a in c.attempts)
            lines.append(f"- rollouts ({len(c.attempts)}): {ids}; `{c.export}`")
        lines.append("")
    return "\n".join(lines)
