"""Each adapter module (tests/test_public_apis.py: ADAPTERS) still fits the library it adapts.

An adapter reaches into a library where it has no public door; these tests fail, saying what
moved, when an upgrade changes the shape the adapter relies on, instead of the adapter going
quietly inert. TRL's (training/trl_adapter.py) is held by tests/test_fused_head.py, which also
checks that the switched path computes the same log-probabilities.
"""

from __future__ import annotations

import contextlib
import inspect
import socket
import warnings
from pathlib import Path

import pytest

# ---------------------------------------------------------------------------------------- mcp


def test_mcp_validates_where_the_adapter_caches():
    import jsonschema
    import mcp.server.lowlevel.server as lowlevel
    from mcp.client.session import ClientSession

    from autoenvscaling.mcp_servers import mcp_adapter

    mcp_adapter.install()
    # the server validates through its module's `jsonschema` name, now our cache
    assert "jsonschema.validate(" in inspect.getsource(lowlevel.Server.call_tool), (
        "mcp's server no longer calls jsonschema.validate: revisit mcp_servers/mcp_adapter.py"
    )
    assert getattr(lowlevel, "jsonschema", None) is not jsonschema, "the server cache is not in"
    assert lowlevel.jsonschema.validate is mcp_adapter.validate
    # the client validates in `_validate_tool_result`, reading `_tool_output_schemas`
    call_tool = inspect.getsource(ClientSession.call_tool)
    assert "self._validate_tool_result(name, result)" in call_tool, (
        "mcp's client no longer validates through _validate_tool_result: revisit mcp_adapter.py"
    )
    assert "_tool_output_schemas" in inspect.getsource(ClientSession.__init__)
    assert ClientSession._validate_tool_result.__module__ == mcp_adapter.__name__


# ---------------------------------------------------------------------------------- llama_cpp


async def test_llama_cpp_serves_the_proxy_the_adapter_hands_it():
    llama_app = pytest.importorskip("llama_cpp.server.app")
    from llama_cpp.server.model import LlamaProxy
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    from autoenvscaling.training.serving.llama_cpp_adapter import create_app

    class Proxy:  # loads nothing
        def __init__(self, models: list[ModelSettings]) -> None:
            self.models = models

    models = [ModelSettings(model="unused.gguf", model_alias="policy")]
    create_app(Proxy, ServerSettings(), models)
    assert llama_app.LlamaProxy is LlamaProxy, "the adapter must restore llama-cpp-python's name"
    async with contextlib.asynccontextmanager(llama_app.get_llama_proxy)() as proxy:
        assert isinstance(proxy, Proxy), (
            "llama-cpp-python's routes no longer get the proxy create_app builds by the module's "
            "LlamaProxy name: revisit training/serving/llama_cpp_adapter.py"
        )
        assert proxy.models == models
    # what StrictLlamaProxy (training/serving/embedded_serve.py) uses of LlamaProxy is public
    for name in ("__call__", "__setitem__"):
        assert name in vars(LlamaProxy), f"LlamaProxy.{name} is gone"


# ------------------------------------------------------------------------------------- harbor


def test_harbor_base_environment_keeps_the_helpers_the_adapter_calls():
    from harbor.environments.base import BaseEnvironment

    for name in ("_effective_memory_mb", "_effective_cpus", "_effective_storage_mb"):
        assert isinstance(inspect.getattr_static(BaseEnvironment, name, None), property), (
            f"BaseEnvironment.{name} is gone: revisit tools/harbor_adapter.py"
        )
    expected = {
        "_merge_env": ["self", "env"],
        "_resolve_user": ["self", "user"],
        "_startup_env": ["self"],
        "_upload_environment_dir_after_start": ["self"],
    }
    for name, parameters in expected.items():
        method = getattr(BaseEnvironment, name, None)
        assert method is not None, (
            f"BaseEnvironment.{name} is gone: revisit tools/harbor_adapter.py"
        )
        assert list(inspect.signature(method).parameters) == parameters, name
    assert inspect.iscoroutinefunction(BaseEnvironment._upload_environment_dir_after_start)


def test_harbor_lint_parser_still_names_unpinned_packages(tmp_path: Path):
    from autoenvscaling.tools.harbor_adapter import pip_install_packages

    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "FROM debian:bookworm-slim\n"
        "RUN pip install --no-cache-dir requests numpy==1.26.4 && \\\n"
        "    pip3 install flask\n"
    )
    found = list(pip_install_packages(dockerfile, 2))
    unpinned = [p for _, packages in found for p in packages]
    assert unpinned == ["requests", "flask"], found
    assert [command[:2] for command, _ in found] == [["pip", "install"], ["pip3", "install"]]


# ------------------------------------------------------------------------------------- docker


def test_docker_client_and_socket_keep_what_the_adapter_uses():
    from docker import APIClient

    method = getattr(APIClient, "_disable_socket_timeout", None)
    assert method is not None, "docker-py's _disable_socket_timeout is gone: see docker_adapter.py"
    assert list(inspect.signature(method).parameters) == ["self", "socket"]
    left, right = socket.socketpair()
    with left, right:
        wrapped = socket.SocketIO(left, "rb")
        assert wrapped._sock is left  # what docker_adapter.shutdown reaches through

        from autoenvscaling.tools.sandbox.docker_adapter import shutdown

        shutdown(wrapped)
        assert right.recv(1) == b""  # the peer sees the end: the real socket was shut down
        wrapped.close()
        shutdown(wrapped)  # closed: nothing to do, no error


# ---------------------------------------------------------------------------------- langgraph


def _graphs(durability_of_child: str | None):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict):
        n: int

    child = StateGraph(State)
    child.add_node("inc", lambda s: {"n": s["n"] + 1})
    child.set_entry_point("inc")
    child_graph = child.compile(checkpointer=False)

    async def run_child(state: State) -> State:
        kwargs = {"durability": durability_of_child} if durability_of_child else {}
        return await child_graph.ainvoke(state, **kwargs)

    parent = StateGraph(State)
    parent.add_node("child", run_child)
    parent.set_entry_point("child")
    return parent.compile(checkpointer=InMemorySaver())


async def test_langgraph_still_needs_the_nested_durability_workaround():
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(AttributeError, match="_put_checkpoint_fut"):
        await _graphs(None).ainvoke({"n": 0}, config, durability="sync")
    # (when this fails, LangGraph runs a checkpointer-less child inside a "sync" parent: drop
    # graphs/agent/langgraph_adapter.py and the durability="exit" arguments of nested invocations)
    out = await _graphs("exit").ainvoke({"n": 0}, config, durability="sync")
    assert out == {"n": 1}


async def test_langgraph_warns_as_the_adapter_filters():
    import re

    from autoenvscaling.graphs.agent import langgraph_adapter

    graph = _graphs("exit")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        await graph.ainvoke({"n": 0}, {"configurable": {"thread_id": "a"}}, durability="sync")
    ours = [w for w in seen if str(w.message).startswith(langgraph_adapter.DURABILITY_WARNING)]
    assert ours, (
        "LangGraph no longer warns as graphs/agent/langgraph_adapter.py expects: "
        f"{[str(w.message) for w in seen]}"
    )
    assert all(w.category is UserWarning for w in ours)
    assert all(w.filename.endswith("langgraph/pregel/main.py") for w in ours)
    assert re.match(langgraph_adapter.WARNING_MODULE, "langgraph.pregel.main")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        langgraph_adapter.install()
        await graph.ainvoke({"n": 0}, {"configurable": {"thread_id": "b"}}, durability="sync")
    assert not [w for w in seen if langgraph_adapter.DURABILITY_WARNING in str(w.message)]
