"""Candidates as the viewer shows them: each proposal of a round with its verdict, and for each
gate stage the evidence it measured (rewards of the oracle, nop and repeat trials, every
anti-cheat probe, the calibration pass rate, the nearest pool task, lint findings).

A candidate is a folder `candidates/rNN/<name>/`; its verdict and the proposer's last gate run
lie next to it (`<name>.verdict.json`, `<name>.precheck.json`, tools/report/links.py). A folder
with no verdict yet is a candidate the gate is still judging (or a proposer still writing).
"""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ..tools.gate.kinds import Kind, Missing
from ..tools.gate.results import StageResult, Verdict
from ..tools.report.links import calibration_attempts, trial_dirs, verdict_files
from .run_folder import PathOutsideRun, RunFolder

#: The most of instruction.md (its start) and task.toml (whole) read for a title and category.
HEADLINE_BYTES = 1024 * 1024


class Fact(BaseModel):
    label: str
    value: str


class Probe(BaseModel):
    name: str
    passed: bool | None = None
    skipped: bool = False
    reward: float | None = None
    reason: str = ""


class StageEvidence(BaseModel):
    """One stage's result with what it measured, ready to show."""

    result: StageResult
    facts: list[Fact] = Field(default_factory=list)
    probes: list[Probe] = Field(default_factory=list)
    findings: list[Fact] = Field(default_factory=list, description="Lint: rule -> message.")
    attempts: list[str] = Field(default_factory=list, description="Calibration rollout ids.")
    trials: list[str] = Field(default_factory=list, description="Trial folders, run-relative.")


class CandidateSummary(BaseModel):
    round: int
    name: str
    folder: str = Field(description="Run-relative.")
    judged: bool
    admitted: bool = False
    stage: str | None = None
    reason: str = ""
    proposer_reward: float | None = None
    infrastructure_error: bool = False
    kind: Kind | None = Field(
        default=None, description="Whose 'no': task_wrong, cannot_run_here, infrastructure."
    )
    missing: list[Missing] = Field(
        default_factory=list, description="For cannot_run_here: what this machine lacks."
    )

    @property
    def verdict_label(self) -> str:
        """The verdict in words, one per kind of "no": "rejected" is task_wrong (the task is
        broken), a task this machine cannot run is not a rejected one."""
        if not self.judged:
            return "being judged"
        if self.admitted:
            return "admitted"
        if self.kind == "cannot_run_here":
            return "cannot run here"
        if self.kind == "infrastructure" or (self.kind is None and self.infrastructure_error):
            return "not judged (infrastructure)"
        return "rejected"


class CandidateDetail(CandidateSummary):
    title: str = Field(default="", description="The instruction's first line (model-written).")
    category: str = Field(default="", description="task.toml's metadata.category.")
    verdict: Verdict | None = None
    precheck: Verdict | None = None
    stages: list[StageEvidence] = Field(default_factory=list)
    precheck_stages: list[StageEvidence] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    trials: list[str] = Field(default_factory=list)
    attempts: list[str] = Field(default_factory=list, description="Calibration rollouts.")


def _verdict(run: RunFolder, path: Path) -> Verdict | None:
    data = run.read_bytes(path)
    try:
        return None if data is None else Verdict.model_validate_json(data)
    except (ValidationError, ValueError):
        return None


def _is_folder(path: Path) -> bool:
    """A folder itself, not a link to one (a link may lead anywhere on the host)."""
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _folders(run: RunFolder, round_: int) -> list[Path]:
    folder = run.layout.candidates(round_)
    if not _is_folder(folder):
        return []
    return sorted(p for p in folder.iterdir() if _is_folder(p))


def _summary(run: RunFolder, round_: int, folder: Path) -> CandidateSummary:
    verdict = _verdict(run, verdict_files(folder)[0])
    common: dict[str, Any] = {
        "round": round_,
        "name": folder.name,
        "folder": folder.relative_to(run.root).as_posix(),
    }
    if verdict is None:
        return CandidateSummary(judged=False, **common)
    return CandidateSummary(
        judged=True,
        admitted=verdict.admitted,
        stage=verdict.stage,
        reason=verdict.reason,
        proposer_reward=verdict.proposer_reward,
        infrastructure_error=verdict.infrastructure_error,
        kind=verdict.kind,
        missing=verdict.missing,
        **common,
    )


def list_candidates(run: RunFolder, round_: int | None = None) -> list[CandidateSummary]:
    rounds = [round_] if round_ is not None else run.candidate_rounds()
    return [_summary(run, r, f) for r in rounds for f in _folders(run, r)]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if value is None:
        return "—"
    return str(value)


def _facts(result: StageResult) -> list[Fact]:
    """The numbers each stage measured (keys the gate's stages write; others in the raw view)."""
    d = result.details
    keys: dict[str, tuple[str, ...]] = {
        "build": ("image",),
        "oracle": ("reward", "error", "duration_sec"),
        "nop": ("reward", "error", "duration_sec"),
        "repeat": ("rewards",),
        "anti_cheat": ("verifier_mode",),
        "decontam": ("status", "closest", "similarity"),
        "calibrate": ("mean", "rewards", "band", "rollouts", "infrastructure_errors"),
        "dedup": ("pool_size", "threshold"),
    }
    facts = [
        Fact(
            label=k,
            value=", ".join(_fmt(v) for v in d[k]) if isinstance(d[k], list) else _fmt(d[k]),
        )
        for k in keys.get(result.stage, ())
        if k in d
    ]
    if result.stage == "calibrate" and isinstance(d.get("mean"), int | float):
        facts.insert(0, Fact(label="calibration pass rate", value=f"{d['mean']:.2f}"))
    closest = d.get("closest")
    if result.stage == "dedup" and isinstance(closest, dict):
        nearest = Path(str(closest.get("key") or "")).name
        facts.insert(0, Fact(label="nearest pool task", value=nearest or "—"))
        facts.insert(1, Fact(label="similarity", value=_fmt(closest.get("similarity"))))
    return facts


def _probes(result: StageResult) -> list[Probe]:
    probes = result.details.get("probes")
    if not isinstance(probes, dict):
        return []
    out = []
    for name, p in probes.items():
        if not isinstance(p, dict):
            continue
        reward = p.get("reward")
        out.append(
            Probe(
                name=str(name),
                passed=p.get("passed") if isinstance(p.get("passed"), bool) else None,
                skipped=bool(p.get("skipped")),
                reward=reward if isinstance(reward, int | float) else None,
                reason=str(p.get("reason") or ""),
            )
        )
    return out


def _findings(result: StageResult) -> list[Fact]:
    found = result.details.get("findings")
    if not isinstance(found, list):
        return []
    return [
        Fact(
            label=f"{f.get('severity', '')} {f.get('rule', '')} "
            f"{f.get('file') or ''}{':' + str(f['line']) if f.get('line') else ''}".strip(),
            value=str(f.get("message") or ""),
        )
        for f in found
        if isinstance(f, dict)
    ]


def stage_evidence(run: RunFolder, result: StageResult) -> StageEvidence:
    dump = result.model_dump(mode="json")
    return StageEvidence(
        result=result,
        facts=_facts(result),
        probes=_probes(result),
        findings=_findings(result),
        attempts=calibration_attempts([dump]),
        trials=[r for p in trial_dirs([dump]) if (r := run.relative(p)) is not None],
    )


def _headline(run: RunFolder, folder: Path) -> tuple[str, str]:
    """(the instruction's first non-empty line without its '#', task.toml's category); each
    read from a regular file of the run only."""
    try:
        lines = run.read_text(folder / "instruction.md", HEADLINE_BYTES).text
    except (PathOutsideRun, OSError):  # a link out, a FIFO, not written yet
        lines = ""
    title = next((ln.lstrip("# ").strip() for ln in lines.splitlines() if ln.strip()), "")
    toml = run.read_bytes(folder / "task.toml", HEADLINE_BYTES)
    try:
        meta = tomllib.loads(toml.decode("utf-8")).get("metadata") if toml is not None else None
        category = str(meta.get("category", "")) if isinstance(meta, dict) else ""
    except (ValueError, RecursionError):
        category = ""
    return title[:300], category


def candidate_detail(run: RunFolder, round_: int, name: str) -> CandidateDetail | None:
    folder = run.layout.candidates(round_) / name
    if "/" in name or "\0" in name or name in ("", ".", "..") or not _is_folder(folder):
        return None
    summary = _summary(run, round_, folder)
    verdict_path, precheck_path = verdict_files(folder)
    verdict, precheck = _verdict(run, verdict_path), _verdict(run, precheck_path)
    stages = [stage_evidence(run, s) for s in (verdict.stages if verdict else [])]
    pre = [stage_evidence(run, s) for s in (precheck.stages if precheck else [])]
    trials = list(dict.fromkeys(t for s in [*pre, *stages] for t in s.trials))
    title, category = _headline(run, folder)
    return CandidateDetail(
        **summary.model_dump(),
        title=title,
        category=category,
        verdict=verdict,
        precheck=precheck,
        stages=stages,
        precheck_stages=pre,
        files=run.files_under(folder.relative_to(run.root)),
        trials=trials,
        attempts=[a for s in stages for a in s.attempts],
    )
