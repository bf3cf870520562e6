"""The rollout reader MCP server over a real store, through a real MCP client (in memory)."""

from __future__ import annotations

import json

import pytest
from mcp.shared.memory import create_connected_server_and_client_session
from pydantic import AnyUrl

from autoenvscaling.mcp_servers.rollouts import build_rollouts_server
from autoenvscaling.tools.rollouts.models import Attempt, Step
from autoenvscaling.tools.rollouts.store import RolloutStore


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "rollouts.db"
    store = RolloutStore(path)
    for i in range(6):
        store.record_attempt(
            Attempt(
                id=f"ok-{i}",
                task_id="easy",
                category="files",
                policy_version="v1",
                outcome="solved",
                reward=1.0,
            ),
            [
                Step(
                    index=0,
                    tool_name="run",
                    tool_args={"command": "ls"},
                    tool_output="a b c",
                    exit_code=0,
                )
            ],
        )
    store.record_attempt(
        Attempt(
            id="bad",
            task_id="hard",
            category="build",
            policy_version="v1",
            outcome="failed",
            reward=0.0,
            error="verifier: expected 3 got 2",
        ),
        [
            Step(
                index=i,
                message=f"try {i}",
                tool_name="run",
                tool_args={"command": f"make {i}"},
                tool_output=("compiler says: undefined reference to `main'\n" * 200)
                if i == 30
                else "ok",
                exit_code=1 if i == 30 else 0,
            )
            for i in range(45)
        ],
    )
    store.close()
    return path


def connect(server):
    return create_connected_server_and_client_session(server._mcp_server)


async def call(session, tool, **args):
    result = await session.call_tool(tool, args)
    assert not result.isError, result.content[0].text
    return result.structuredContent


async def test_summary_pass_rates_and_failures(db):
    async with connect(build_rollouts_server(db)) as client:
        summary = await call(client, "rollout_summary")
        assert (summary["attempts"], summary["steps"]) == (7, 51)
        rates = await call(client, "pass_rates", by="task")
        assert [(r["key"], r["pass_rate"]) for r in rates["rows"]] == [("hard", 0.0), ("easy", 1.0)]
        rates = await call(client, "pass_rates", by="category", limit=1)
        assert rates["truncated"] and rates["total_rows"] == 2
        failures = (await call(client, "recent_failures", output_chars=200))["failures"]
        assert [f["attempt_id"] for f in failures] == ["bad"]
        assert failures[0]["last_error_step"] == 30
        assert "undefined reference" in failures[0]["last_error_output"]
        assert len(failures[0]["last_error_output"]) < 300  # sized for a model's context


async def test_trajectory_is_paged_with_output_excerpts(db):
    async with connect(build_rollouts_server(db)) as client:
        page = await call(client, "get_trajectory", attempt_id="bad", output_chars=500)
        assert page["total_steps"] == 45 and len(page["steps"]) == 20
        assert page["next_start_step"] == 20
        page = await call(
            client, "get_trajectory", attempt_id="bad", start_step=20, output_chars=500
        )
        step = page["steps"][10]
        assert step["index"] == 30 and step["exit_code"] == 1
        assert "bytes truncated" in step["tool_output"] and step["output_bytes"] == 9000
        assert step["tool_args"] == {"command": "make 30"}
        page = await call(client, "get_trajectory", attempt_id="bad", start_step=40)
        assert page["next_start_step"] is None and len(page["steps"]) == 5

        result = await client.call_tool("get_trajectory", {"attempt_id": "missing"})
        assert result.isError and "no attempt 'missing'" in result.content[0].text


async def test_list_attempts_and_search(db):
    async with connect(build_rollouts_server(db)) as client:
        listed = await call(client, "list_attempts", task_id="easy", limit=4)
        assert len(listed["attempts"]) == 4 and listed["has_more"]
        listed = await call(client, "list_attempts", outcome="failed")
        assert [a["id"] for a in listed["attempts"]] == ["bad"]
        assert listed["attempts"][0]["error"] == "verifier: expected 3 got 2"
        hits = (await call(client, "search_rollouts", text="undefined reference"))["hits"]
        assert [(h["attempt_id"], h["step_index"]) for h in hits] == [("bad", 30)]
        hits = (await call(client, "search_rollouts", text="expected 3"))["hits"]
        assert [(h["attempt_id"], h["kind"]) for h in hits] == [("bad", "error")]


async def test_rollout_resource(db):
    async with connect(build_rollouts_server(db)) as client:
        templates = (await client.list_resource_templates()).resourceTemplates
        assert [t.uriTemplate for t in templates] == ["rollout://{attempt_id}"]
        result = await client.read_resource(AnyUrl("rollout://bad"))
        page = json.loads(result.contents[0].text)
        assert page["attempt"]["id"] == "bad" and len(page["steps"]) == 20


async def test_tools_are_read_only_and_store_is_not_modified(db):
    before = db.read_bytes()
    async with connect(build_rollouts_server(db)) as client:
        tools = (await client.list_tools()).tools
        assert tools and all(t.annotations.readOnlyHint for t in tools)
        await call(client, "rollout_summary")
    assert RolloutStore(db, read_only=True).summary().attempts == 7
    assert db.read_bytes() == before


async def test_missing_store_is_a_clear_tool_error(tmp_path):
    async with connect(build_rollouts_server(tmp_path / "none.db")) as client:
        result = await client.call_tool("rollout_summary", {})
        assert result.isError and "no rollout store" in result.content[0].text
        assert "no rollouts were recorded yet" in result.content[0].text


@pytest.mark.parametrize("given", ["missing", "folder", "not sqlite", "opened store"])
async def test_errors_name_no_host_path(tmp_path, given):
    """Whatever the store is, an error says what is wrong with `<store>`, not where it lies."""
    folder = tmp_path / "run-of-someone"
    folder.mkdir()
    (folder / "junk.db").write_text("not a database " * 100)
    targets = {
        "missing": (folder / "none.db", "no rollout store at <store>"),
        "folder": (folder, "<store> is a folder"),
        "not sqlite": (folder / "junk.db", "<store> is not a rollout store"),
        "opened store": (RolloutStore(folder / "rollouts.db"), "no attempt 'missing'"),
    }
    target, expected = targets[given]
    async with connect(build_rollouts_server(target)) as client:
        tool = "get_trajectory" if given == "opened store" else "rollout_summary"
        result = await client.call_tool(
            tool, {"attempt_id": "missing"} if tool != "rollout_summary" else {}
        )
        shown = [result.content[0].text]
        try:
            await client.read_resource(AnyUrl("rollout://missing"))
        except Exception as exc:  # noqa: BLE001 - the client raises the server's error
            shown.append(str(exc))
    assert result.isError and expected in shown[0], shown[0]
    assert len(shown) == 2 and expected in shown[1], shown
    for text in shown:
        assert str(tmp_path) not in text and "run-of-someone" not in text, text
