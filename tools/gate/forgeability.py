"""Could an RL policy forge this task's reward? A static answer, before any build.

The gate's anti-cheat stage proves it with probes (`anti_cheat/probes.py`: `program`, `git`,
`shadow`); this reads the same weaknesses from the files, so a user importing a benchmark sees
which tasks a policy could learn to forge, and what to change, before training on them.

A verifier is forgeable when it runs code the agent controls as a user that can write the
reward (`/logs/verifier`): the agent's program (`/app/run.sh`, `python3 /app/x.py`, a binary it
built), git in the agent's repository (its config and hooks run programs), Python with the
agent's folder on its path (`PYTHONPATH=/app`, `sys.path.insert(0, "/app")`, `python3 -m`/`-c`
started in a folder the agent writes), or every test in the agent's own container with the agent
running as root (a shared verifier). Running such code as an unprivileged user (`setpriv`,
`runuser`, `su`, `sudo -u`, subprocess `user=`) clears the line it is on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..tasks.dockerfile import Dockerfile, DockerfileError
from ..trials.verifier import shared_verifier_risk
from .lint.model import TaskView
from .lint.written_paths import is_written, written_by_verifier

Route = Literal["agent_program", "git_in_agent_repo", "agent_python_path", "shared_root"]

_FIX: dict[Route, str] = {
    "agent_program": "run the agent's programs as an unprivileged user (`setpriv --reuid=nobody "
    "--regid=nogroup --clear-groups`, or subprocess user=/group=) that cannot write "
    "/logs/verifier, and end its processes before writing the reward",
    "git_in_agent_repo": "read the agent's repository with its config and hooks off (`git -c "
    "core.hooksPath=/dev/null -c core.fsmonitor=false`, on a copy), or as an unprivileged user",
    "agent_python_path": "import the agent's modules only in a subprocess run as an "
    "unprivileged user, and start the checker as `python3 /tests/<script>.py` from /tests",
    "shared_root": 'use the separate verifier ([verifier] environment_mode = "separate") or '
    "run the agent as an unprivileged user ([agent] user)",
}

_DROPS_PRIVILEGE = re.compile(
    r"\b(?:setpriv\b[^\n]*--reuid|runuser\b|su\s+-?\s*\w+\s+-c|sudo\s+(?:-\S+\s+)*-u\s|"
    r"chroot\s+--userspec|user\s*=\s*['\"]?\w|preexec_fn\s*=\s*\w*(?:setuid|demote|drop))",
)
_GIT = re.compile(r"""(?:^|[\s;&|(\[,'"])git['"]?\s*[,\s]""")
_PYTHON_PATH = re.compile(
    r"PYTHONPATH\s*[=:]\s*['\"]?([^\s'\";]*)|sys\.path\.(?:insert|append)\([^)]*?['\"](/[^'\"]+)"
)
# Python that puts its current folder first on sys.path (-m, -c, a script on stdin). Bare pytest
# with /tests arguments is left out: its rootdir and conftest files come from /tests.
_PYTHON_FROM_CWD = re.compile(r"\bpython3?(?:\.\d+)?\s+(?:-\w+\s+)*(?:-m|-c|-)(?:\s|$)")
_CWD_ARG = re.compile(r"""cwd\s*=\s*['"](/[^'"]+)""")
_CD = re.compile(r"(?:^|[;&|(]\s*|\bthen\s+|\bdo\s+)cd\s+(\"[^\"]+\"|'[^']+'|[^\s;&|)]+)")
_RUN_LITERAL = re.compile(r"""['"](/[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)+)['"]""")
_INTERPRETERS = r"(?:python3?(?:\.\d+)?|bash|sh|node|ruby|perl|php|java\s+-jar|Rscript)"
_SHELL_RUN = re.compile(
    rf"(?:^|[;&|(!]\s*|\b(?:if|then|do|else|exec|timeout\s+\S+|{_INTERPRETERS})\s+)"
    r"(/[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)+)(?=\s|$|;|\)|')"
)
_PY_RUN = re.compile(r"\b(?:subprocess\.\w+|os\.system|os\.exec\w*|Popen|pexpect\.spawn)\s*\(")


class ForgeRoute(BaseModel):
    """One way the agent's code reaches the reward."""

    route: Route
    file: str = Field(description="path relative to the task folder")
    line: int | None = None
    what: str = Field(description="the code the verifier runs, e.g. `/app/solve.py`")
    fix: str


class Forgeability(BaseModel):
    task: str
    forgeable: bool = Field(description="some route lets the agent's code write the reward")
    routes: list[ForgeRoute] = Field(default_factory=list)

    @property
    def forgeable_if_separate(self) -> bool:
        """Still forgeable with the tests in a fresh container (`shared_root` mechanically fixed):
        the verifier itself runs the agent's code as a user that can write the reward."""
        return any(r.route != "shared_root" for r in self.routes)

    def summary(self) -> str:
        if not self.forgeable:
            return f"{self.task}: not forgeable (statically)"
        kinds = sorted({r.route for r in self.routes})
        return f"{self.task}: forgeable via {', '.join(kinds)}"


def _agent_path(path: str, workdir: str) -> bool:
    """Under the agent's work (its workdir, which a separate verifier copies in and a shared one
    keeps): code there is the agent's to write."""
    path, workdir = path.rstrip("/") or "/", workdir.rstrip("/") or "/"
    if workdir == "/" or path.startswith("/tests"):
        return False
    return path == workdir or path.startswith(workdir + "/")


def _workdir(task: Path) -> str:
    view = TaskView.of(task)
    if view.workdir:
        return view.workdir
    if view.dockerfile is not None:
        try:
            return Dockerfile.read(view.dockerfile).workdir() or "/app"
        except DockerfileError:
            pass
    return "/app"


def _scan(rel: str, text: str, python: bool, workdir: str, own: set[str]) -> list[ForgeRoute]:
    out: list[ForgeRoute] = []
    cwd = workdir  # test.sh starts in the workdir unless it moves
    in_call = 0  # lines left of a multi-line subprocess call (Python)

    def add(route: Route, number: int, what: str) -> None:
        out.append(ForgeRoute(route=route, file=rel, line=number, what=what, fix=_FIX[route]))

    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
        if not code.strip() or _DROPS_PRIVILEGE.search(code):
            continue
        if not python:
            for match in _CD.finditer(code):
                cwd = match.group(1).strip("\"'")
        for match in _PYTHON_PATH.finditer(code):
            folders = [f for f in (match.group(1) or match.group(2) or "").split(":") if f]
            agent = [f for f in folders if _agent_path(f, workdir)]
            if agent:
                add("agent_python_path", number, f"Python path {agent[0]}")
        git_dir = re.search(r"git\s+(?:-C\s+|--git-dir[= ]\s*|--work-tree[= ]\s*)(\S+)", code)
        git_cwd = _CWD_ARG.search(code) if python else None
        if _GIT.search(" " + code):
            where = (git_dir.group(1) if git_dir else None) or (
                git_cwd.group(1) if git_cwd else (None if python else cwd)
            )
            where = (where or "").strip("\"',)")
            if where and _agent_path(where, workdir):
                add("git_in_agent_repo", number, f"git in {where}")
        if python:
            in_call = 4 if _PY_RUN.search(code) else max(in_call - 1, 0)
            if in_call:
                for match in _RUN_LITERAL.finditer(code):
                    program = match.group(1)
                    if _agent_path(program, workdir) and not is_written(program, own, workdir):
                        add("agent_program", number, program)
                        break
        else:
            for match in _SHELL_RUN.finditer(code):
                program = match.group(1)
                if _agent_path(program, workdir) and not is_written(program, own, workdir):
                    add("agent_program", number, program)
                    break
            if _PYTHON_FROM_CWD.search(code) and _agent_path(cwd, workdir):
                add("agent_python_path", number, f"Python started in {cwd} (-m/-c)")
    return out


def forgeability(task_dir: Path | str) -> Forgeability:
    """The routes by which the agent's code could write this task's reward (static, best effort:
    a route it misses the anti-cheat stage's probes may still find)."""
    task = Path(task_dir)
    workdir = _workdir(task)
    routes: list[ForgeRoute] = []
    tests = task / "tests"
    sources: list[tuple[Path, str]] = []
    for path in sorted(p for p in tests.rglob("*") if p.is_file()) if tests.is_dir() else []:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if path.suffix in (".py", ".sh", ".bash") or text.startswith("#!"):
            sources.append((path, text))
    own = written_by_verifier(sources)  # what the tests put there themselves is theirs
    for path, text in sources:
        rel = path.relative_to(task).as_posix()
        routes += _scan(rel, text, path.suffix == ".py", workdir, own)
    if (risk := shared_verifier_risk(task)) is not None:
        routes.append(
            ForgeRoute(route="shared_root", file="task.toml", what=risk, fix=_FIX["shared_root"])
        )
    return Forgeability(task=task.name, forgeable=bool(routes), routes=routes)
