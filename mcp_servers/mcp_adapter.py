"""mcp's adapter: the one module that touches private parts of mcp (tests/test_public_apis.py).

Cached JSON-Schema validators for MCP tool calls (mcp < 2). mcp has no public knob for how it
validates: the server calls its module's `jsonschema.validate`, the client its private
`ClientSession._validate_tool_result`. tests/test_adapters.py fails when an mcp upgrade moves
either.

mcp 1.x validates tool calls with `jsonschema.validate` (the server: the structured result, and
the arguments where asked; the client: the structured result). `validate` checks the schema
against its metaschema and builds a new validator on every call: profiled over 100 in-memory
`run("true")` calls, `validate` took 88% of the time (19 of 22 ms a call), 97% of it in
`check_schema`. The schemas of a session never change, so one checked validator per schema gives
the same verdicts for the price of walking the instance (+11.9 ms -> +1.2 ms over the shell,
benchmarks/bench_mcp.py --local). mcp 2 caches validators itself; drop this module with mcp 2.

`install()` is idempotent and touches only mcp's own references (the server module's
`jsonschema` name and `ClientSession._validate_tool_result`), never `jsonschema` itself.
`AUTOENVSCALING_MCP_SCHEMA_CACHE=0` leaves mcp as it is (benchmarks/bench_mcp.py measures both).
"""

from __future__ import annotations

import json
import os
import threading
import types
from functools import lru_cache
from typing import Any

import jsonschema
import jsonschema.validators
import mcp.server.lowlevel.server as lowlevel
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from mcp.client.session import ClientSession
from referencing import Registry
from referencing.exceptions import Unresolvable

__all__ = ["install", "validate", "validator_for"]

_lock = threading.Lock()
_installed = False


@lru_cache(maxsize=256)
def _cached(schema_json: str) -> Validator:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)  # once per schema: raises SchemaError like `validate` does
    # An explicit empty registry, as mcp's client uses: `$ref`s resolve inside the schema only.
    return cls(schema, registry=Registry())


def validator_for(schema: dict[str, Any]) -> Validator:
    """The checked validator for `schema`, built once per distinct schema."""
    return _cached(json.dumps(schema, sort_keys=True, default=str))


def validate(instance: Any, schema: dict[str, Any], *args: Any, **kwargs: Any) -> None:
    """`jsonschema.validate` with a cached validator: raises the same best-match error."""
    error = best_match(validator_for(schema).iter_errors(instance))
    if error is not None:
        raise error


def install() -> None:
    """Route mcp 1.x's per-call schema validation through the cache."""
    global _installed
    with _lock:
        if _installed or os.environ.get("AUTOENVSCALING_MCP_SCHEMA_CACHE", "1") == "0":
            return

        if getattr(lowlevel, "jsonschema", None) is jsonschema:
            shim = types.SimpleNamespace(
                validate=validate,
                ValidationError=jsonschema.ValidationError,
                SchemaError=jsonschema.SchemaError,
            )
            lowlevel.jsonschema = shim  # pyright: ignore[reportPrivateImportUsage] - replaces mcp's module ref
        original = ClientSession._validate_tool_result

        async def _validate_tool_result(self: ClientSession, name: str, result: Any) -> None:
            if name not in self._tool_output_schemas:
                return await original(self, name, result)  # first call: mcp lists the tools
            schema = self._tool_output_schemas.get(name)
            if schema is None:
                return None
            if result.structuredContent is None:
                raise RuntimeError(
                    f"Tool {name} has an output schema but did not return structured content"
                )
            try:
                validate(result.structuredContent, schema)
            except jsonschema.ValidationError as exc:
                raise RuntimeError(
                    f"Invalid structured content returned by tool {name}: {exc}"
                ) from exc
            except (jsonschema.SchemaError, Unresolvable) as exc:
                raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from exc
            return None

        ClientSession._validate_tool_result = _validate_tool_result
        _installed = True
