"""Typer options generated from the run configuration (graphs/config.py): declared there once.

`config_options()` turns every field with a `Cli` marker into a typer option (flag, help, type,
default); `with_config_options` gives a command those options in addition to its own, and calls
it with the configuration's values collected in one dict (`config_values`). An option defaults to
the field's default, or to None where a preset or the run resolves the value (the marker's
`unset`, or any field a preset sets: the command line must win over the preset, so "not given"
has to be told apart from the default).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ..graphs.config import PRESETS, RunConfig, cli_marker


def _preset_fields() -> set[str]:
    return {name for values in PRESETS.values() for name in values}


def option_default(name: str, field: FieldInfo) -> Any:
    """What the command line passes when the option is not given."""
    marker = cli_marker(name)
    if marker is None:
        raise KeyError(f"{name} is not a command-line option")
    if marker.unset or name in _preset_fields() or field.default is PydanticUndefined:
        return None
    return field.default


def option_type(name: str, field: FieldInfo) -> Any:
    """The option's type: the marker's, else the field's; Optional when its default is None."""
    marker = cli_marker(name)
    assert marker is not None
    kind: Any = marker.type or field.annotation
    return kind | None if option_default(name, field) is None else kind


def option_flag(name: str) -> str:
    marker = cli_marker(name)
    assert marker is not None
    return marker.flag or "--" + name.replace("_", "-")


def config_options() -> list[inspect.Parameter]:
    """One keyword parameter, typer-annotated, per command-line field of RunConfig."""
    params = []
    for name, field in RunConfig.model_fields.items():
        marker = cli_marker(name)
        if marker is None:
            continue
        decls = [option_flag(name)]
        kind = option_type(name, field)
        if field.annotation is bool:  # a switch: --name/--no-name, as typer spells it by default
            decls = [f"{decls[0]}/--no-{decls[0][2:]}"]
        if marker.short:
            decls.append(marker.short)
        help_text = marker.help if marker.help is not None else field.description
        option = typer.Option(*decls, help=help_text or None)
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=option_default(name, field),
                annotation=Annotated[kind, option],
            )
        )
    return params


def with_config_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give `command` (whose last parameter is `config_values: dict[str, Any]`) the generated
    options; its own parameters stay as they are and come first in `--help`."""
    own = [
        p
        for p in inspect.signature(command, eval_str=True).parameters.values()
        if p.name != "config_values"
    ]
    generated = config_options()
    clash = {p.name for p in own} & {p.name for p in generated}
    if clash:
        raise TypeError(f"{command.__name__} declares configuration fields itself: {clash}")
    names = [p.name for p in generated]

    def wrapper(**kwargs: Any) -> Any:
        values = {n: kwargs.pop(n) for n in names}
        return command(**kwargs, config_values=values)

    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + generated
    wrapper.__name__ = command.__name__
    wrapper.__doc__ = command.__doc__
    wrapper.__signature__ = inspect.Signature(params, return_annotation=None)
    wrapper.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return wrapper
