"""The #18 fixes keep their answers: cached MCP schema validation gives jsonschema's verdicts,
streamed MinHash equals the all-at-once one, the windowed store search still ranks."""

from __future__ import annotations

import jsonschema
import pytest
from datasketch import MinHash
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session
from pydantic import BaseModel

from autoenvscaling.mcp_servers import mcp_adapter as schema_cache
from autoenvscaling.tools.rollouts.models import Attempt, Step
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.tasks.similarity import DedupIndex, words

SCHEMA = {
    "type": "object",
    "properties": {"exit_code": {"type": "integer"}, "output": {"type": "string"}},
    "required": ["exit_code"],
}


class Out(BaseModel):
    n: int


def test_cached_validation_matches_jsonschema():
    for instance in ({"exit_code": 0}, {"exit_code": "0"}, {"output": "x"}, []):
        try:
            jsonschema.validate(instance, SCHEMA)
            expected = None
        except jsonschema.ValidationError as exc:
            expected = exc.message
        try:
            schema_cache.validate(instance, SCHEMA)
            got = None
        except jsonschema.ValidationError as exc:
            got = exc.message
        assert got == expected
    assert schema_cache.validator_for(dict(SCHEMA)) is schema_cache.validator_for(SCHEMA)
    with pytest.raises(jsonschema.SchemaError):
        schema_cache.validate({}, {"type": "no-such-type"})


async def test_mcp_still_rejects_a_tool_result_that_breaks_its_schema():
    server = FastMCP("t")

    @server.tool()
    def good() -> Out:
        return Out(n=1)

    async with create_connected_server_and_client_session(server._mcp_server) as session:
        assert (await session.call_tool("good", {})).structuredContent == {"n": 1}
        await session.list_tools()
        session._tool_output_schemas["good"] = {  # the client now expects a string
            "type": "object",
            "properties": {"n": {"type": "string"}},
        }
        with pytest.raises(RuntimeError, match="Invalid structured content"):
            await session.call_tool("good", {})


def _old_minhash(text: str) -> MinHash:
    tokens = words(text)
    size = min(5, max(len(tokens), 1))
    shingles = {" ".join(tokens[i : i + size]).encode() for i in range(len(tokens) - size + 1)}
    m = MinHash(num_perm=128, seed=1)
    m.update_batch(list(shingles or {b""}))
    return m


def test_streamed_minhash_equals_the_all_at_once_one():
    index = DedupIndex()
    long = " ".join(f"w{i % 997} x{i % 13}" for i in range(20_000))  # > one batch, repeats
    for text in ("", "two words", "exactly five words here now", long):
        assert (index.minhash(text).hashvalues == _old_minhash(text).hashvalues).all(), text


def test_windowed_search_ranks_and_finds_rare_and_common_words(tmp_path, monkeypatch):
    import autoenvscaling.tools.rollouts.queries as rs

    monkeypatch.setattr(rs, "SEARCH_WINDOW", 3)
    with RolloutStore(tmp_path / "r.db") as store:
        for i in range(10):
            output = "common " + ("rare needle" if i == 2 else "filler") + " common" * (i % 3)
            store.record_attempt(
                Attempt(id=f"a{i}", task_id="t", outcome="failed", reward=0.0),
                [Step(index=0, tool_name="run", tool_output=output)],
            )
        assert [h.attempt_id for h in store.search("needle")] == ["a2"]  # older than the window
        hits = store.search("common", limit=10)
        assert {h.attempt_id for h in hits} <= {"a7", "a8", "a9"} and len(hits) == 3
