"""Trials as the viewer shows them: each Harbor trial folder of the run with its reward, agent
log and verifier output, and the way into Harbor's own viewer for it.

Trial folders lie under `trials/`: a solver attempt's directly (`trials/<trial>/`), the gate's
under the candidate and stage (`trials/<candidate>/<stage>/<trial>/`). A folder is a trial when
it holds Harbor's `config.json`, `result.json` or `trial.log`; one without `result.json` is still
running (Harbor writes it at the end). Harbor's viewer reads a folder of jobs, each a folder of
trials: a trial is `/jobs/<its parent>/trials/<its name>` under `harbor view <grandparent> --jobs`.
"""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .run_folder import FileText, PathOutsideRun, RunFolder

_MARKERS = ("result.json", "config.json", "trial.log")
_DEPTH = 4
#: The most of one log a trial page shows.
LOG_BYTES = 64 * 1024


class TrialSummary(BaseModel):
    path: str = Field(description="Run-relative folder.")
    name: str
    finished: bool
    reward: float | None = None
    error: str | None = None


class HarborLink(BaseModel):
    command: str = Field(description="`harbor view` over the folder that holds this trial's job.")
    route: str = Field(description="The trial's page in Harbor's viewer.")
    url: str | None = Field(default=None, description="A link, when a Harbor viewer is given.")


class TrialDetail(TrialSummary):
    logs: list[FileText] = Field(default_factory=list, description="Agent logs, trial.log.")
    verifier: list[FileText] = Field(default_factory=list)
    harbor: HarborLink | None = None


def harbor_viewer_installed() -> bool:
    """Harbor's web viewer, with its built pages, is importable here."""
    spec = importlib.util.find_spec("harbor")
    if spec is None or not spec.submodule_search_locations:
        return False
    return any(
        (Path(p) / "viewer" / "static" / "index.html").is_file()
        for p in spec.submodule_search_locations
    )


def _trial_folders(root: Path) -> list[Path]:
    found: list[Path] = []
    frontier = [root]
    for _ in range(_DEPTH):
        nxt = []
        for folder in frontier:
            try:
                children = [c for c in folder.iterdir() if c.is_dir() and not c.is_symlink()]
            except OSError:
                continue
            for child in children:
                if any((child / m).is_file() for m in _MARKERS):
                    found.append(child)
                else:
                    nxt.append(child)
        frontier = nxt
    return sorted(found)


def _reward(run: RunFolder, folder: Path, result: Any) -> float | None:
    rewards = (
        ((result or {}).get("verifier_result") or {}).get("rewards")
        if isinstance(result, dict)
        else None
    )
    if isinstance(rewards, dict) and isinstance(rewards.get("reward"), int | float):
        return float(rewards["reward"])
    text = run.read_bytes(folder / "verifier" / "reward.txt", 1024)
    try:
        return None if text is None else float(text.decode("utf-8").strip())
    except ValueError:
        return None


def _summary(run: RunFolder, folder: Path) -> TrialSummary:
    result = run.read_json(folder / "result.json")
    error = None
    if isinstance(result, dict) and isinstance(result.get("exception_info"), dict):
        info = result["exception_info"]
        error = f"{info.get('exception_type', '')}: {info.get('exception_message', '')}".strip()
    return TrialSummary(
        path=folder.relative_to(run.root).as_posix(),
        name=folder.name,
        finished=isinstance(result, dict),
        reward=_reward(run, folder, result),
        error=error,
    )


def list_trials(run: RunFolder) -> list[TrialSummary]:
    return [_summary(run, f) for f in _trial_folders(run.layout.trials)]


def harbor_link(run: RunFolder, folder: Path, base_url: str | None) -> HarborLink:
    jobs_dir = folder.parent.parent
    route = f"/jobs/{folder.parent.name}/trials/{folder.name}"
    url = None
    if base_url and jobs_dir == run.root:
        url = base_url.rstrip("/") + route
    return HarborLink(
        command=f"harbor view {shlex.quote(str(jobs_dir))} --jobs", route=route, url=url
    )


def trial_detail(run: RunFolder, relative: str, harbor_url: str | None) -> TrialDetail | None:
    folder = run.resolve(relative)
    if not folder.is_dir() or not folder.is_relative_to(run.layout.trials.resolve()):
        return None
    if not any((folder / m).is_file() for m in _MARKERS):
        return None
    rel = folder.relative_to(run.root)

    def texts(paths: list[Path], tail: bool = False) -> list[FileText]:
        shown = []
        for path in paths:
            try:
                shown.append(run.read_text(path.relative_to(run.root), LOG_BYTES, tail=tail))
            except (PathOutsideRun, OSError):  # a link out, a FIFO, gone: not shown
                continue
        return shown

    def under(name: str) -> list[Path]:
        return [folder / name / p for p in run.files_under(folder.relative_to(run.root) / name)]

    return TrialDetail(
        **_summary(run, folder).model_dump(),
        logs=texts([*under("agent"), folder / "trial.log"], tail=True),  # where a log is now
        verifier=texts(under("verifier")),
        harbor=harbor_link(run, run.root / rel, harbor_url) if harbor_viewer_installed() else None,
    )
