"""Table columns derived from the pydantic models: the models are the one declaration.

A rollout table row is a model's fields in declaration order, under the same names except where a
`Table` renames one (SQL reserved words). Storage types follow the field's type: datetimes as ISO
text, dicts as JSON text, the rest as they are. The SQL schema itself is the migration history in
schema.py (shipped migrations never change); tests/test_store.py checks that every model
matches its table there, column for column.
"""

from __future__ import annotations

import json
import sqlite3
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

if TYPE_CHECKING:
    import datasets


@dataclass(frozen=True)
class Table[M: BaseModel]:
    """One SQL table holding one model: field `name` is column `renames.get(name, name)`."""

    name: str
    model: type[M]
    renames: Mapping[str, str] = field(default_factory=dict)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(self.model.model_fields)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.renames.get(f, f) for f in self.fields)

    @property
    def column_list(self) -> str:
        """`a, b, c` for SELECT and INSERT."""
        return ", ".join(self.columns)

    def row(self, item: M) -> tuple[Any, ...]:
        """The SQL parameters of `item`, in column order."""
        return tuple(_to_sql(getattr(item, f)) for f in self.fields)

    def load(self, row: sqlite3.Row) -> M:
        """The model of a row SELECTed with `column_list` (extra columns such as seq are ignored)."""
        data: dict[str, Any] = {}
        for name, column in zip(self.fields, self.columns, strict=True):
            value = row[column]
            if _is_json(self.model.model_fields[name].annotation):
                if not value:
                    continue  # NULL (or empty) JSON: the field's default
                value = json.loads(value)
            data[name] = value
        return self.model.model_validate(data)

    def record(self, item: M, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
        """A dataset row of `item` (JSON-mode values, JSON columns as strings), as `features`."""
        data = item.model_dump(mode="json", exclude=set(exclude))
        for name, value in data.items():
            if value is not None and _is_json(self.model.model_fields[name].annotation):
                data[name] = json.dumps(value)
        return data

    def features(self, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
        """Hugging Face `datasets` features of the model's fields (JSON columns as strings)."""
        import datasets

        return {
            name: _feature(datasets, info.annotation)
            for name, info in self.model.model_fields.items()
            if name not in exclude
        }


def _to_sql(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return value


def _inner(annotation: Any) -> Any:
    """`X | None` -> X."""
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return _inner(rest[0])
    return annotation


def _is_json(annotation: Any) -> bool:
    inner = _inner(annotation)
    return (get_origin(inner) or inner) in (dict, list)


def _feature(ds: Any, annotation: Any) -> datasets.Value:
    inner = _inner(annotation)
    base = get_origin(inner) or inner
    if base is Literal:
        kinds = {type(a) for a in get_args(inner)}
        base = kinds.pop() if len(kinds) == 1 else str
    kind = {bool: "bool", int: "int64", float: "float64"}.get(base, "string")
    if base not in (bool, int, float, str, datetime, dict, list):
        raise TypeError(f"no dataset feature for {annotation!r}: add it to tools/rollouts/columns")
    return ds.Value(kind)
