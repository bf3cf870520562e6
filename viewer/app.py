"""The viewer's web app (Starlette): one GET route per page, Jinja2 templates with autoescape.

Read-only by construction: no route takes anything but GET, the run folder is only read, and
file paths resolve inside the run folder or are refused. Pages are complete HTML without
script; `static/live.js` only refreshes the parts marked `data-live` from fragments the server
renders (and escapes) too. Headers: a Content-Security-Policy that allows the viewer's own
files only (no inline script or style, no frames), nosniff, and a host check so a web page
elsewhere cannot reach the local server through DNS rebinding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..tools.rollouts.models import Outcome, Role
from .candidates import candidate_detail, list_candidates
from .conversation import conversation
from .curves import HEIGHT, PAD, WIDTH, charts
from .overview import live_status, overview
from .revisions import revisions
from .run_folder import PathOutsideRun, RunFolder
from .trials import list_trials, trial_detail

HERE = Path(__file__).parent
PAGE_SIZE = 100
#: The largest round or offset a page takes (SQLite's integers end at 2**63; a page's far before).
MAX_NUMBER = 10**9
ROLES: dict[str, Role] = {"solver": "solver", "proposer": "proposer"}
OUTCOMES: dict[str, Outcome | Literal["running"]] = {
    "solved": "solved",
    "failed": "failed",
    "timeout": "timeout",
    "error": "error",
    "running": "running",
}
HEADERS = {
    b"content-security-policy": b"default-src 'none'; script-src 'self'; style-src 'self'; "
    b"img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; "
    b"frame-ancestors 'none'",
    b"x-content-type-options": b"nosniff",
    b"referrer-policy": b"no-referrer",
    b"cache-control": b"no-store",
}


class SecurityHeaders:
    """Adds HEADERS to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [
                    *message.get("headers", []),
                    *((k, v) for k, v in HEADERS.items() if k not in present),
                ]
            await send(message)

        await self.app(scope, receive, with_headers)


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    value = max(0, int(value))
    hours, rest = divmod(value, 3600)
    return f"{hours}h {rest // 60:02d}m" if hours else f"{rest // 60}m {rest % 60:02d}s"


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "missing"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def templates() -> Jinja2Templates:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every page, every fragment: model-written text is hostile
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(seconds=_seconds, num=_num)
    env.globals.update(chart_size=(WIDTH, HEIGHT, PAD))
    return Jinja2Templates(env=env)


def create_app(
    run_dir: Path,
    *,
    harbor_url: str | None = None,
    refresh_ms: int = 2000,
    allowed_hosts: list[str] | None = None,
) -> Starlette:
    run = RunFolder(run_dir)
    pages = templates()

    def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        context.update(run_name=run.root.name, run_root=str(run.root), refresh_ms=refresh_ms)
        return pages.TemplateResponse(request, name, context, status_code=status)

    def home(request: Request) -> Response:
        return render(request, "overview.html", view=overview(run))

    def live(request: Request) -> Response:
        return render(request, "_live.html", live=live_status(run))

    def curves(request: Request) -> Response:
        history = run.history()
        episodes = {m.round: run.grpo_episode_rewards(m.round) for m in history}
        return render(request, "curves.html", charts=charts(history, episodes), history=history)

    def candidates(request: Request) -> Response:
        round_ = _number(request.query_params.get("round"), "round")
        return render(
            request,
            "candidates.html",
            candidates=list_candidates(run, round_),
            rounds=run.candidate_rounds(),
            round=round_,
        )

    def candidate(request: Request) -> Response:
        round_ = _number(request.path_params["round"], "round")
        name = request.path_params["name"]
        if round_ is None:
            raise HTTPException(404, "no such round")
        detail = candidate_detail(run, round_, name)
        if detail is None:
            raise HTTPException(404, f"no candidate {name} in round {round_}")
        store = run.store()
        proposer = (
            store.list_attempts(role="proposer", task_id=name, round=round_, limit=1)
            if store
            else []
        )
        transcript = run.transcript(store.location, proposer[0].id) if store and proposer else None
        return render(
            request,
            "candidate.html",
            c=detail,
            proposer=proposer[0] if proposer else None,
            revisions=revisions(transcript) if transcript else [],
        )

    def rollouts(request: Request) -> Response:
        q = request.query_params
        role, outcome = ROLES.get(q.get("role", "")), OUTCOMES.get(q.get("outcome", ""))
        round_, offset = _number(q.get("round"), "round"), _number(q.get("offset"), "offset") or 0
        task = q.get("task") or None
        store = run.store()
        attempts = (
            store.list_attempts(
                role=role,
                outcome=outcome,
                task_id=task,
                round=round_,
                limit=PAGE_SIZE + 1,
                offset=offset,
            )
            if store
            else []
        )
        filters = {
            "role": role or "",
            "round": "" if round_ is None else str(round_),
            "task": task or "",
            "outcome": outcome or "",
        }
        return render(
            request,
            "rollouts.html",
            attempts=attempts[:PAGE_SIZE],
            more=len(attempts) > PAGE_SIZE,
            offset=offset,
            page=PAGE_SIZE,
            filters=filters,
            roles=list(ROLES),
            outcomes=list(OUTCOMES),
        )

    def rollout(request: Request) -> Response:
        found = conversation(run, request.path_params["attempt_id"])
        if found is None:
            raise HTTPException(404, "no such attempt in the rollout store")
        part = "part" in request.query_params  # the live part alone (static/live.js)
        return render(request, "_rollout.html" if part else "rollout.html", conv=found)

    def trials(request: Request) -> Response:
        return render(request, "trials.html", trials=list_trials(run))

    def trial(request: Request) -> Response:
        try:
            found = trial_detail(run, "trials/" + request.path_params["path"], harbor_url)
        except (PathOutsideRun, OSError):
            found = None
        if found is None:
            raise HTTPException(404, "no such trial folder")
        part = "part" in request.query_params
        return render(request, "_trial.html" if part else "trial.html", t=found)

    def files(request: Request) -> Response:
        relative = request.path_params["path"] or "."
        try:
            path = run.resolve(relative)
            if path.is_dir():
                prefix = "" if path == run.root else path.relative_to(run.root).as_posix() + "/"
                entries = run.listing(relative)
                return render(request, "folder.html", path=relative, prefix=prefix, entries=entries)
            return render(request, "file.html", file=run.read_text(relative))
        except (PathOutsideRun, OSError) as exc:
            raise HTTPException(404, "no such file in the run folder") from exc

    async def not_found(request: Request, exc: Exception) -> Response:
        detail = exc.detail if isinstance(exc, HTTPException) else "not found"
        code = exc.status_code if isinstance(exc, HTTPException) else 404
        return render(request, "error.html", status=code, message=detail)

    hosts = allowed_hosts or ["127.0.0.1", "localhost", "[::1]"]
    return Starlette(
        routes=[
            Route("/", home),
            Route("/live", live),
            Route("/curves", curves),
            Route("/candidates", candidates),
            Route("/candidates/{round}/{name}", candidate),
            Route("/rollouts", rollouts),
            Route("/rollouts/{attempt_id}", rollout),
            Route("/trials", trials),
            Route("/trials/{path:path}", trial),
            Route("/files/{path:path}", files),
            Route("/favicon.ico", lambda _: Response(status_code=204)),  # none; no 404 noise
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=hosts),
            Middleware(SecurityHeaders),
        ],
        exception_handlers={HTTPException: not_found},
    )


def _number(value: str | None, name: str) -> int | None:
    """A page's whole-number parameter; None when not given; 400 when not one in range."""
    if value in (None, ""):
        return None
    if not value.isascii() or not value.isdigit() or len(value) > len(str(MAX_NUMBER)):
        raise HTTPException(400, f"{name} must be a whole number from 0 to {MAX_NUMBER:,}")
    number = int(value)
    if number > MAX_NUMBER:
        raise HTTPException(400, f"{name} must be a whole number from 0 to {MAX_NUMBER:,}")
    return number
