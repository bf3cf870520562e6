"""The viewer over a run folder made by a whole scripted flywheel round (tests/test_flywheel.py's:
real sandboxes, Harbor trials, the gate, the store; only the model's replies are scripted), in
Debian's Chromium. The proposer's title and a solver's command output carry a `<script>`."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from autoenvscaling.tools.report.links import trial_dirs

from . import flywheel_policy
from .conftest import FIXTURES
from .test_viewer_browser import Watched, browser  # noqa: F401 - the browser fixture
from .viewer_server import serve

TITLE = '<script>window.__pwned = "title"</script>Sum the numbers'
OUTPUT = '<script>window.__pwned = "output"</script>'

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def hostile_policy() -> Callable[[Sequence[BaseMessage]], AIMessage | str]:
    """tests/flywheel_policy's shared policy, with a model-written `<script>` in the task's
    title and in what a solver's command prints (the sandbox runs it: the output is real)."""
    inner = flywheel_policy.shared_policy()

    def respond(messages: Sequence[BaseMessage]) -> AIMessage | str:
        out = inner(messages)
        if isinstance(out, str) and "<file path=" in out:
            return out.replace(
                "The file `/app/numbers.txt`", f"# {TITLE}\n\nThe file `/app/numbers.txt`", 1
            )
        system = str(messages[0].content) if isinstance(messages[0], SystemMessage) else ""
        if "skilled terminal agent" in system and isinstance(out, AIMessage) and out.tool_calls:
            call = out.tool_calls[0]
            if call["args"].get("command") == "ls":
                call["args"]["command"] = f"echo '{OUTPUT}'; ls"
        return out

    return respond


async def _run(root: Path, seed: Path) -> None:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from autoenvscaling.graphs.agent.scripted_model import register
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.builder import build_flywheel, checkpoint_serde

    ctx = FlywheelContext(
        run_dir=str(root),
        rounds=1,
        proposals=2,
        arm="error_feedback",
        policy_model=register("viewer-policy", hostile_policy()),
        seed_dir=str(seed),
        train=False,
        max_revisions=1,
        refresh_attempts=2,
        calibration_rollouts=4,
        solver_max_turns=3,
        proposer_max_turns=4,
    )
    root.mkdir(parents=True)
    async with aiosqlite.connect(root / "graph.sqlite") as conn:
        graph = build_flywheel(checkpointer=AsyncSqliteSaver(conn, serde=checkpoint_serde()))
        await graph.ainvoke(
            {"rounds": 1},
            {"configurable": {"thread_id": "flywheel"}, "recursion_limit": 500},
            context=ctx,
        )


def test_the_viewer_over_a_scripted_round(engine_ready, browser, tmp_path):  # noqa: F811
    import asyncio

    from autoenvscaling.tools.rollouts.store import RolloutStore

    seed = tmp_path / "seed"
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    root = tmp_path / "run"
    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API holds this thread's loop
        pool.submit(asyncio.run, _run(root, seed)).result()
    with RolloutStore(root / "rollouts.db", read_only=True) as store:
        hostile = [
            a
            for a in store.list_attempts(role="solver", limit=1000)
            if any(OUTPUT in (s.tool_output or "") for s in store.trajectory(a.id).steps)
        ]
    assert hostile, "no solver printed the hostile output"

    check_pages(browser, root, hostile[0].id)


def check_pages(chromium: object, root: Path, hostile_attempt: str) -> None:
    """The overview, each candidate's verdict and a hostile rollout of a finished run, each as
    the run's own files say (the round's outcome is the gate's business: tests/test_flywheel.py)."""
    from autoenvscaling.tools.gate.results import Verdict
    from autoenvscaling.tools.report.run_report import load_history

    metrics = load_history(root / "reports")[0]
    verdicts = {
        p.name.removesuffix(".verdict.json"): Verdict.model_validate_json(p.read_text())
        for p in (root / "candidates" / "r01").glob("*.verdict.json")
    }
    summary = "; ".join(v.summary() for v in verdicts.values())
    assert len(verdicts) == 2, summary
    w = Watched(chromium)
    try:
        with serve(root) as base:
            page = w.goto(base + "/")
            assert "Run ended after 1 round(s)" in page.inner_text("#live")
            row = page.locator("#rounds tr").all_inner_texts()[1].split("\t")
            assert row[:3] == ["1", str(metrics.candidates), str(metrics.admitted)], summary
            w.assert_inert()

            page = w.goto(base + "/candidates")
            rows = {
                r.split("\t")[1]: r.split("\t")
                for r in page.locator("#candidates tr").all_inner_texts()[1:]
            }
            assert {name: (r[2], r[3]) for name, r in rows.items()} == {
                name: ("admitted" if v.admitted else "rejected", v.stage or "")
                for name, v in verdicts.items()
            }
            for name, verdict in verdicts.items():
                page = w.goto(f"{base}/candidates/1/{name}")
                assert page.inner_text("#title") == TITLE
                stages = page.locator("table.stages").first.locator("tr").all_inner_texts()[1:]
                assert [s.split("\t")[:2] for s in stages] == [
                    [r.stage, "skipped" if r.skipped else ("passed" if r.passed else "FAILED")]
                    for r in verdict.stages
                ], summary
                calibrate = next((r for r in verdict.stages if r.stage == "calibrate"), None)
                if calibrate is not None and not calibrate.skipped:
                    ids = [a["attempt_id"] for a in calibrate.details["attempts"]]
                    links = page.locator("#calibrate p.rollouts a").all_inner_texts()
                    assert links == [i[:12] for i in ids]
                oracle = next((r for r in verdict.stages if r.stage == "oracle"), None)
                if oracle is not None and oracle.details.get("trial_dir"):
                    # Its trial folder, and its reruns' when the first run did not score 1.0.
                    folders = trial_dirs([oracle.model_dump(mode="json")])
                    assert page.locator("#oracle p.trials a").count() == len(folders) >= 1
                w.assert_inert(TITLE)

            page = w.goto(f"{base}/rollouts/{hostile_attempt}")
            assert OUTPUT in page.locator("#conversation pre.output").first.inner_text()
            w.assert_inert(OUTPUT)
    finally:
        w.close()
