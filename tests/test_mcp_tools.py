"""MCP servers as LangChain tools (langchain-mcp-adapters) over kept-open sessions, in a LangGraph agent."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage

from autoenvscaling.graphs.agent.mcp_tools import open_mcp_tools
from autoenvscaling.mcp_servers.filesystem import build_filesystem_server
from autoenvscaling.mcp_servers.rollouts import build_rollouts_server
from autoenvscaling.mcp_servers.terminal import build_terminal_server
from autoenvscaling.tools.rollouts.models import Attempt
from autoenvscaling.tools.rollouts.store import RolloutStore


class ScriptedModel(GenericFakeChatModel):
    """The only scripted part: the model's replies. Tools, servers and sandbox are real."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def tool_call(name: str, args: dict, call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def invoke_call(name: str, args: dict, call_id: str = "1") -> dict:
    return {"type": "tool_call", "name": name, "args": args, "id": call_id}


async def test_terminal_tools_keep_state_across_calls(workspace, tmp_path):
    servers = {
        "terminal": build_terminal_server(ref=workspace.ref),
        "filesystem": build_filesystem_server(tmp_path),
    }
    async with open_mcp_tools(servers) as tools:
        by_name = {tool.name: tool for tool in tools}
        assert {"run", "read_output", "interrupt", "read_file", "write_file", "grep"} <= set(
            by_name
        )
        run = by_name["run"]
        await run.ainvoke(invoke_call("run", {"command": "cd /usr && export MARK=42"}))
        message = await run.ainvoke(invoke_call("run", {"command": "pwd; echo $MARK"}))
        assert isinstance(message, ToolMessage) and message.status == "success"
        assert message.artifact["structured_content"]["output"] == "/usr\n42\n"

        refused = await by_name["read_file"].ainvoke(invoke_call("read_file", {"path": "../x"}))
        assert refused.status == "error" and "[traversal]" in str(refused.content)


async def test_prefix_separates_servers_with_the_same_tool_names(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    servers = {
        "left": build_filesystem_server(tmp_path / "a"),
        "right": build_filesystem_server(tmp_path / "b"),
    }
    with pytest.raises(ValueError, match="prefix=True"):
        async with open_mcp_tools(servers):
            pass
    async with open_mcp_tools(servers, prefix=True) as tools:
        by_name = {tool.name: tool for tool in tools}
        await by_name["left_write_file"].ainvoke({"path": "f.txt", "content": "L"})
        assert (tmp_path / "a" / "f.txt").read_text() == "L"
        assert not (tmp_path / "b" / "f.txt").exists()


async def test_agent_node_uses_terminal_filesystem_and_rollout_tools(workspace, tmp_path):
    store = RolloutStore(tmp_path / "rollouts.db")
    store.record_attempt(
        Attempt(task_id="t1", outcome="failed", reward=0.0, error="ModuleNotFoundError: yaml")
    )
    (tmp_path / "files").mkdir()
    servers = {
        "terminal": build_terminal_server(ref=workspace.ref),
        "filesystem": build_filesystem_server(tmp_path / "files"),
        "rollouts": build_rollouts_server(store),
    }
    model = ScriptedModel(
        messages=iter(
            [
                tool_call("recent_failures", {"limit": 5}, "c1"),
                tool_call("run", {"command": "mkdir -p /tmp/w && cd /tmp/w && echo hi > f"}, "c2"),
                tool_call("run", {"command": "pwd; cat f"}, "c3"),
                tool_call(
                    "write_file", {"path": "task/instruction.md", "content": "Install yaml."}, "c4"
                ),
                AIMessage(content="done"),
            ]
        )
    )
    async with open_mcp_tools(servers) as tools:
        agent = create_agent(model, tools)
        state = await agent.ainvoke({"messages": [("user", "write a task")]})
    results = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    assert "ModuleNotFoundError" in str(results["c1"].content)
    assert results["c3"].artifact["structured_content"]["output"] == "/tmp/w\nhi\n"  # cwd kept
    assert (tmp_path / "files" / "task" / "instruction.md").read_text() == "Install yaml."
    assert state["messages"][-1].content == "done"


async def test_errors_raised_in_the_block_come_out_as_themselves(tmp_path):
    with pytest.raises(KeyError, match="mine"):
        async with open_mcp_tools({"filesystem": build_filesystem_server(tmp_path)}):
            raise KeyError("mine")
