"""The viewer's pages in a real browser: Debian's Chromium driven by Playwright.

The run folder is made by the run's own code (tests/viewer_run.py: the flywheel up to its
fan-out, the store's writers, make_verdict, Harbor's TrialResult), served by uvicorn on a
loopback port. Model-written `<script>`s (a task title, a file name, a tool output) must show
as text and never run; the overview must follow a run that writes while it is open.

Chromium comes from `make system` (the Debian package): no browser is downloaded. A machine
without it fails here, with what to run: CI installs it, so a missing browser is a set-up
error, never a skip.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoenvscaling.tools.report.run_report import save_history
from autoenvscaling.tools.rollouts.store import RolloutStore

from .viewer_run import (
    SCRIPT_FILE,
    SCRIPT_OUTPUT,
    SCRIPT_TASK,
    SCRIPT_TITLE,
    ViewerRun,
    build_run_sync,
    finish_trial,
    history,
    start_trial,
)
from .viewer_server import serve

pytestmark = pytest.mark.timeout(120)

CHROMIUM = os.environ.get("AUTOENVSCALING_CHROMIUM", "/usr/bin/chromium")
#: Where to save each page's screenshot (docs/viewer/ holds the ones docs/runs.md shows).
SCREENSHOTS = os.environ.get("VIEWER_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).is_file() and not shutil.which("chromium"):
        pytest.fail(f"no Chromium at {CHROMIUM}: run `make system` (installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
        )
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def viewer_run(tmp_path_factory: pytest.TempPathFactory) -> ViewerRun:
    tmp = tmp_path_factory.mktemp("viewer")
    return build_run_sync(tmp / "run", tmp)


@pytest.fixture(scope="module")
def url(viewer_run: ViewerRun) -> Iterator[str]:
    with serve(viewer_run.root) as base:
        yield base


class Watched:
    """A page with everything that would show a script ran: dialogs, errors, CSP reports."""

    def __init__(self, browser: Any, **context: Any) -> None:
        self.context = browser.new_context(**context)
        self.page = self.context.new_page()
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)

    def goto(self, url: str) -> Any:
        response = self.page.goto(url)
        assert response is not None and response.ok, (url, response and response.status)
        return self.page

    def assert_inert(self, *texts: str) -> None:
        """Each hostile text is on the page as text, and nothing it carried ran or rendered."""
        page = self.page
        body = page.inner_text("body")
        for text in texts:
            assert text in body, f"{text!r} is not shown as text"
        assert page.evaluate("typeof window.__pwned") == "undefined"
        # Our one script; no element a hostile text could have made.
        assert page.evaluate("document.scripts.length") == 1
        assert page.locator("main img, main [onerror], main [onload], main b").count() == 0
        assert not self.dialogs and not self.errors, (self.dialogs, self.errors)

    def shot(self, name: str) -> None:
        if SCREENSHOTS:
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"), full_page=True)

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def watched(browser: Any) -> Iterator[Watched]:
    w = Watched(browser, viewport={"width": 1280, "height": 900})
    yield w
    w.close()


def test_overview_shows_the_run_its_rounds_and_what_runs_now(watched, url, viewer_run):
    from autoenvscaling.tools.run_dir import RunDir

    manifest = RunDir(viewer_run.root).manifest()
    page = watched.goto(url + "/")
    assert manifest.run_id in page.inner_text("h1")
    # The flywheel stopped at its fan-out: round 1, both proposer slots pending.
    assert "Round 1 in progress" in page.inner_text("#now")
    nodes = page.locator("table.nodes tr").all_inner_texts()[1:]
    assert [re.split(r"\s+", n.strip()) for n in nodes] == [
        ["propose_one", "0", "running"],
        ["propose_one", "1", "running"],
    ]
    rows = page.locator("#rounds tr").all_inner_texts()[1:]
    assert [r.split("\t")[:4] for r in rows] == [
        ["1", "2", "1", "0.5"],
        ["2", "1", "0", "missing"],
        ["3", "2", "2", "1"],
    ]
    assert (
        page.inner_text("#warnings") == "round 1: the solver never called a tool in 2 of 4 attempts"
    )
    assert "ck-0001" in page.inner_text("#lineage")
    modes = dict(r.split("\t", 1) for r in page.locator("#settings-modes tr").all_inner_texts())
    assert modes["decontamination"].startswith("NOT CONFIGURED")
    assert modes["proposer_training"] in ("true", "false")
    assert dict(r.split("\t", 1) for r in page.locator("#settings-budgets tr").all_inner_texts())[
        "proposals"
    ] == str(manifest.config["proposals"])
    watched.assert_inert()
    watched.shot("overview")


def test_a_candidates_verdict_its_evidence_and_revisions(watched, url, viewer_run):
    page = watched.goto(url + "/candidates")
    assert page.locator("#candidates tr").count() == 3
    page.click(f"text={viewer_run.admitted}")
    assert page.url.endswith(f"/candidates/1/{viewer_run.admitted}")
    assert page.inner_text("#verdict").startswith("Admitted (NOT RUN: decontam)")
    assert page.inner_text("#title") == SCRIPT_TITLE
    stages = page.locator("table.stages").first.locator("tr").all_inner_texts()[1:]
    assert [s.split("\t")[:2] for s in stages] == [
        ["lint", "passed"],
        ["build", "passed"],
        ["oracle", "passed"],
        ["nop", "passed"],
        ["repeat", "passed"],
        ["anti_cheat", "passed"],
        ["decontam", "skipped"],
        ["calibrate", "passed"],
        ["dedup", "passed"],
    ]
    probes = page.locator("#anti_cheat table.probes tr").all_inner_texts()[1:]
    assert [p.split("\t")[:3] for p in probes] == [
        ["leak", "held", "missing"],
        ["forge", "held", "0"],
    ]
    calibrate = page.inner_text("#calibrate table.facts")
    assert "calibration pass rate\t0.50" in calibrate and "rewards\t0, 1, 0, 1" in calibrate
    assert "nearest pool task\tword-count" in page.inner_text("#dedup")
    assert page.locator("#repeat table.facts").inner_text() == "rewards\t1, 1, 1"
    assert page.locator("#calibrate p.rollouts a").all_inner_texts() == viewer_run.calibration
    # The proposer's revision: a diff of what its edit_file changed, shown as text.
    assert page.locator("section.revision").count() == 2
    diff = page.inner_text("#revision-1 pre.diff")
    assert "-# Count lines" in diff and f"+# {SCRIPT_TITLE}" in diff
    assert "1 terminal command(s)" in page.inner_text("#revision-1")
    watched.assert_inert(SCRIPT_TITLE, f"environment/{SCRIPT_FILE}", SCRIPT_OUTPUT)
    watched.shot("candidate")

    # Its files and its trials are a click away.
    page.click(f"#files a:has-text('{SCRIPT_FILE[:8]}')")
    assert page.inner_text("#file-path").endswith(SCRIPT_FILE)
    assert page.inner_text("#file-text") == "one two three\n"
    watched.assert_inert(SCRIPT_FILE)
    page.go_back()
    page.click("#oracle p.trials a:has-text('oracle1')")
    assert page.inner_text("#reward") == "1"
    assert "solve.sh ran" in page.inner_text("body")
    watched.assert_inert(SCRIPT_OUTPUT)

    page = watched.goto(f"{url}/candidates/1/{viewer_run.rejected}")
    assert page.inner_text("#verdict").startswith("Rejected at oracle")
    watched.assert_inert(SCRIPT_OUTPUT)


def test_a_rollout_as_a_conversation_found_with_the_filters(watched, url, viewer_run):
    page = watched.goto(url + "/rollouts")
    # Filter with the form (a plain GET: no script needed).
    page.select_option("select[name=role]", "solver")
    page.select_option("select[name=outcome]", "failed")
    page.fill("input[name=round]", "1")
    page.click("button[type=submit]")
    tasks = [r.split("\t")[4] for r in page.locator("#rollouts tr").all_inner_texts()[1:]]
    assert sorted(tasks) == sorted(
        [SCRIPT_TASK, f"r01-{viewer_run.admitted}", f"r01-{viewer_run.admitted}"]
    )
    page.fill("input[name=task]", SCRIPT_TASK)
    page.click("button[type=submit]")
    assert page.locator("#rollouts tr").count() == 2
    page.click("#rollouts a")
    assert page.inner_text("#task-id") == SCRIPT_TASK
    assert page.inner_text("#reward") == "0"
    turns = page.locator("#conversation > li .who").all_inner_texts()
    assert turns == ["system", "user", "assistant", "tool · run", "assistant"]
    call = page.locator("#conversation .call").inner_text()
    assert call.startswith("run") and '"command": "wc -w /app/in"' in call
    assert page.locator("#conversation pre.output").inner_text() == SCRIPT_OUTPUT
    assert page.inner_text("#export") == (
        f"autoenvscaling export rollouts {viewer_run.root} --attempt {viewer_run.refresh}"
    )
    watched.assert_inert(SCRIPT_TASK, SCRIPT_OUTPUT)
    watched.shot("rollout")


def test_curves_show_a_missing_value_as_missing(watched, url):
    page = watched.goto(url + "/curves")
    charts = page.locator("figure.chart")
    valid = charts.filter(has_text="valid-environment rate")
    assert valid.locator("table.values tr").all_inner_texts()[1:] == [
        "1\t0.5",
        "2\tmissing",
        "3\t1",
    ]
    # Two points and no line through round 2: the gap is drawn as a gap.
    assert valid.locator("circle").count() == 2 and valid.locator("polyline").count() == 0
    grpo = charts.filter(has_text="GRPO reward variance").locator("table.values tr")
    assert grpo.all_inner_texts()[1:] == [
        "1\t0.188\t1",  # the 4 scored episodes: 0, 1, 1, 1; the proposers: 1, -1
        "2\tmissing\tmissing",
        "3\tmissing\tmissing",
    ]
    watched.assert_inert()


def test_trials_and_their_logs(watched, url, viewer_run):
    page = watched.goto(url + "/trials")
    assert page.locator("#trials tr").count() == 3
    page.click("text=word-count__refresh1")
    assert page.inner_text("#reward") == "0"
    assert "harbor view" in page.inner_text("body")
    watched.assert_inert(SCRIPT_OUTPUT)


def test_pages_work_without_javascript(browser, url, viewer_run):
    w = Watched(browser, java_script_enabled=False)
    try:
        page = w.goto(url + "/")
        assert "Round 1 in progress" in page.inner_text("#now")
        page = w.goto(url + "/rollouts")
        page.fill("input[name=task]", SCRIPT_TASK)
        page.click("button[type=submit]")
        assert page.locator("#rollouts tr").count() == 2
    finally:
        w.close()


def test_the_overview_follows_a_run_while_it_writes(browser, tmp_path):
    run = build_run_sync(tmp_path / "run", tmp_path)
    w = Watched(browser)
    try:
        with serve(run.root, refresh_ms=200) as base:
            page = w.goto(base + "/")
            page.evaluate("window.__loaded_once = true")  # gone if the page reloads
            assert "none" in page.inner_text("#live")
            live = "live-" + SCRIPT_TASK
            with RolloutStore(run.root / "rollouts.db") as store:
                store.start_attempt(
                    id="live-1", task_id=live, round=1, metadata={"purpose": "refresh"}
                )
                page.wait_for_function(
                    "t => document.querySelector('#running')?.innerText.includes(t)",
                    arg=live,
                    timeout=10_000,
                )
                store.finish_attempt("live-1", reward=1.0, outcome="solved")
            page.wait_for_function("() => !document.querySelector('#running')", timeout=10_000)
            save_history(
                run.root / "reports", history(3) + [history(3)[0].model_copy(update={"round": 4})]
            )
            page.wait_for_function(
                "() => document.querySelectorAll('#rounds tr').length === 5", timeout=10_000
            )
            assert page.evaluate("window.__loaded_once") is True
            assert int(page.get_attribute("#live", "data-updates") or 0) >= 3
            w.assert_inert()

            # A trial shows its log while it runs, and its reward once Harbor writes it.
            from autoenvscaling.tools.run_dir import RunDir

            layout = RunDir(run.root)
            task = layout.pool / "word-count"
            trial = start_trial(layout, "word-count__live1", task, "step 1\n")
            page = w.goto(base + "/trials/word-count__live1")
            page.evaluate("window.__loaded_once = true")
            assert page.inner_text("#reward") == "missing" and "running" in page.inner_text(
                "#trial"
            )
            with (trial / "agent" / "agent.log").open("a") as log:
                log.write(f"step 2 {SCRIPT_OUTPUT}\n")
            page.wait_for_function(
                "() => document.querySelector('#trial').innerText.includes('step 2')",
                timeout=10_000,
            )
            finish_trial(trial, task, 1.0)
            page.wait_for_function(
                "() => document.querySelector('#reward').innerText === '1'", timeout=10_000
            )
            assert page.evaluate("window.__loaded_once") is True
            # Finished: the page stops asking.
            asked: list[str] = []
            page.on("request", lambda r: asked.append(r.url) if "part=1" in r.url else None)
            page.wait_for_timeout(1000)  # 5 refresh intervals
            assert asked == []
            w.assert_inert(SCRIPT_OUTPUT)
    finally:
        w.close()


def test_the_hostile_check_catches_text_that_became_markup(browser, viewer_run, monkeypatch):
    """The check above can fail: with autoescape off, the same page fails it."""
    import jinja2

    import autoenvscaling.viewer.app as app

    real = jinja2.Environment
    monkeypatch.setattr(app, "Environment", lambda **kw: real(**{**kw, "autoescape": False}))
    w = Watched(browser)
    try:
        with serve(viewer_run.root) as base:
            w.goto(f"{base}/rollouts/{viewer_run.refresh}")
            with pytest.raises(AssertionError):
                w.assert_inert(SCRIPT_OUTPUT)
            # The policy stopped the injected script; the escaping is what must hold first.
            assert any("Content Security Policy" in e for e in w.errors), w.errors
    finally:
        w.close()
