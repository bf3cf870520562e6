"""The run configuration is declared once (graphs/config.py): the options of `autoenvscaling run`,
the flywheel's Studio form and the presets must agree with it, field for field."""

from __future__ import annotations

from typing import Any, Literal, get_args, get_origin

import pytest
import typer
from pydantic import BaseModel, ValidationError
from typer.testing import CliRunner

from autoenvscaling.cli.config_options import option_default, option_flag
from autoenvscaling.cli.main import app
from autoenvscaling.graphs.config import (
    PRESETS,
    PROPOSER_MAX_TURNS,
    RUN_SETTING,
    FlywheelContext,
    RunConfig,
    cli_marker,
    preset,
)
from autoenvscaling.graphs.flywheel.builder import build_flywheel
from autoenvscaling.graphs.policy_servers import PolicyServers
from autoenvscaling.graphs.proposer.builder import ProposerContext
from autoenvscaling.graphs.solver.attempt import SolverSettings
from autoenvscaling.graphs.solver.builder import SolverContext
from autoenvscaling.tools.agents.solver_interface import SOLVER_MAX_TURNS

# The command's own options: how to run, not what the run is.
OWN = {"resume", "yes", "as_json", "preset_name", "help"}


def _options() -> dict[str, Any]:
    """The options of `autoenvscaling run` as typer builds them, by parameter name."""
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    return {p.name: p for p in command.params if p.opts[0].startswith("--")}


def _cli_fields() -> dict[str, object]:
    return {n: f for n, f in RunConfig.model_fields.items() if cli_marker(n) is not None}


def test_every_option_is_a_setting_and_every_cli_setting_an_option():
    assert set(_options()) - OWN == set(_cli_fields())


@pytest.mark.parametrize("name", sorted(_cli_fields()))
def test_option_agrees_with_the_setting(name: str):
    field = RunConfig.model_fields[name]
    option = _options()[name]
    marker = cli_marker(name)
    assert marker is not None
    # Name: the flag is the field's (or the marker's alias), never a hand-copied spelling.
    assert option_flag(name) in option.opts
    # Default: the field's default, or None where a preset or the run resolves the value.
    default = option_default(name, field)
    assert option.default == default
    if default is not None or RunConfig().model_dump()[name] is None:
        assert default == RunConfig().model_dump()[name]
    else:
        assert marker.unset or any(name in p for p in PRESETS.values()), (
            f"--{name} defaults to None but nothing resolves it"
        )
    # Type: the field's type (or the marker's, for folders), and a value given on the command
    # line validates as the setting.
    kind = marker.type or field.annotation
    if get_origin(kind) is list:  # a repeatable option
        assert option.multiple and option.type_descriptor.annotation == kind
    else:
        base = next(a for a in (get_args(kind) or (kind,)) if a is not type(None))
        assert option.type_descriptor.annotation is base, (name, option.type_descriptor, base)
        if base is bool:
            assert option.is_flag and option.secondary_opts == [f"--no-{option_flag(name)[2:]}"]
    # A value typed on the command line validates as the setting.
    sample = {int: 3, str: "x", bool: False, float: 0.5}
    value = (
        ["some/folder"]
        if option.multiple
        else sample.get(option.type_descriptor.annotation, "some/folder")
    )
    if get_origin(field.annotation) is Literal:  # typed as text, checked by the setting
        value = get_args(field.annotation)[-1]
        with pytest.raises(ValidationError, match="Input should be"):
            RunConfig(**{name: "not-one-of-them"})
    assert getattr(RunConfig(**{name: value}), name) == value
    # Help: the marker's wording or the field's description.
    assert option.help == (marker.help if marker.help is not None else field.description)


def test_a_new_field_shows_in_help_without_copying():
    out = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output
    for name in _cli_fields():
        assert option_flag(name) in out


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_settings(name: str):
    values = preset(name)
    config = RunConfig(**values)
    for key, value in values.items():
        assert getattr(config, key) == value


def test_a_preset_with_a_typo_fails():
    with pytest.raises(ValidationError):
        RunConfig(**{"proposer_max_turn": 3})
    with pytest.raises(ValidationError):
        RunConfig(max_tokens="many")  # type: ignore[arg-type]


def test_the_studio_form_is_the_configuration():
    graph = build_flywheel()
    assert issubclass(graph.context_schema, RunConfig)
    schema = graph.get_context_jsonschema()
    assert set(schema["properties"]) == set(RunConfig.model_fields)
    for name, field in RunConfig.model_fields.items():
        assert schema["properties"][name].get("description") == field.description, name


def test_the_embedded_run_overrides_only_what_is_not_given():
    """A preset fills options left unset; a given option wins (the CLI's merge rule)."""
    given = {"max_tokens": 999, "solver_max_turns": None, "rounds": 3}
    merged = {**given}
    for key, value in preset("embedded").items():
        if merged.get(key) is None:
            merged[key] = value
    config = RunConfig.from_values(merged)
    assert (config.max_tokens, config.solver_max_turns, config.rounds) == (999, 4, 3)
    assert config.policy_server == "embedded"


class _Stoppable:
    stopped = False

    def stop(self) -> None:
        self.stopped = True


async def test_each_run_owns_its_policy_servers():
    """No process-wide registry: a context sees only the servers of the run it belongs to, and
    they stop when that run's block ends."""
    mine, other = PolicyServers(), PolicyServers()
    server = _Stoppable()
    mine.embedded = server  # type: ignore[assignment]
    ctx = FlywheelContext(policy_server="embedded").with_servers(mine)
    assert ctx.servers.for_config(ctx) is server
    assert ctx.model_copy().servers is mine  # a copied context still names the run's servers
    assert FlywheelContext(policy_server="embedded").with_servers(other).servers.embedded is None
    assert FlywheelContext(policy_server="embedded").servers.for_config(ctx) is None
    # A live resource, not a setting: never in the manifest's config or Studio's form.
    assert set(ctx.model_dump()) == set(RunConfig.model_fields)
    assert set(FlywheelContext.model_json_schema()["properties"]) == set(RunConfig.model_fields)
    async with mine:
        pass
    assert server.stopped and mine.embedded is None
    vllm = FlywheelContext(policy_server="vllm", policy_base_url="http://127.0.0.1:9/v1")
    assert type(vllm.servers.for_config(vllm)).__name__ == "VLLMPolicyServer"


def run_settings_of(view: type[BaseModel]) -> dict[str, str]:
    """{view field: run setting} for the fields of `view` that are views of RunConfig."""
    extras = {name: field.json_schema_extra for name, field in view.model_fields.items()}
    return {
        n: str(e[RUN_SETTING])
        for n, e in extras.items()
        if isinstance(e, dict) and e.get(RUN_SETTING)
    }


@pytest.mark.parametrize("view", [ProposerContext, SolverContext])
def test_role_contexts_are_views_of_the_configuration(view):
    settings = run_settings_of(view)
    assert settings, f"{view.__name__} names no run setting"
    for name, setting in settings.items():
        field, source = view.model_fields[name], RunConfig.model_fields[setting]
        assert field.annotation == source.annotation, (view.__name__, name, setting)
        assert field.description
    # A role's own fields are what a standalone graph needs and the run does not configure.
    own = set(view.model_fields) - set(settings)
    assert own <= {"time_budget_sec", "pool_dir", "out_dir", "store_path", "policy_version"}


def test_standalone_graph_defaults_are_unchanged():
    """The Studio faces keep their own (GPU-sized) defaults, the turn limits excepted."""
    assert ProposerContext().model_dump() == {
        "model": "openai:policy",
        "base_url": None,
        "arm": "terminal",
        "solver_feedback": True,
        "max_turns": PROPOSER_MAX_TURNS,
        "time_budget_sec": 1800,
        "max_tokens": 8192,
        "max_revisions": 2,
        "pool_dir": "tasks/seed",
        "out_dir": "candidates",
        "store_path": None,
        "backend": "podman",
        "calibrate": False,
        "policy_version": "base",
    }
    assert SolverContext().model_dump() == {
        "model": "openai:policy",
        "base_url": None,
        "max_turns": SOLVER_MAX_TURNS,
        "time_budget_sec": 900,
        "backend": "podman",
        "store_path": None,
        "policy_version": "base",
    }


def test_one_default_for_the_solvers_turns():
    """Issue 32: the solver's turn limit defaulted to 20, 30, 8 or 4 by entry point. Now every
    entry point takes SOLVER_MAX_TURNS; only the embedded preset differs, on purpose."""
    import inspect

    from autoenvscaling.cli.main import solve
    from autoenvscaling.cli.train import train
    from autoenvscaling.graphs.proposer.settings import gate_config
    from autoenvscaling.training.backend import TrainHyperParams

    assert RunConfig().solver_max_turns == SOLVER_MAX_TURNS
    assert SolverContext().max_turns == SOLVER_MAX_TURNS
    assert SolverSettings().budget.max_turns == SOLVER_MAX_TURNS
    # A budget given as JSON without a turn limit (Harbor agent kwargs) is still the solver's.
    assert SolverSettings.model_validate({"budget": {}}).budget.max_turns == SOLVER_MAX_TURNS
    assert TrainHyperParams().max_turns == SOLVER_MAX_TURNS
    for command in (solve, train):
        assert inspect.signature(command).parameters["max_turns"].default == SOLVER_MAX_TURNS
    assert inspect.signature(gate_config).parameters["solver_max_turns"].default == (
        SOLVER_MAX_TURNS
    )
    assert preset("embedded")["solver_max_turns"] < SOLVER_MAX_TURNS


def test_one_default_for_the_proposers_turns():
    """Issue 32: the proposer's turn limit defaulted to 16 or 40 by entry point (the agent loop
    to 30). Now every entry point takes PROPOSER_MAX_TURNS; only the embedded preset differs."""
    import inspect

    from autoenvscaling.cli.propose import propose
    from autoenvscaling.graphs.agent.loop import LoopBudget
    from autoenvscaling.graphs.proposer.settings import ProposerSettings

    assert RunConfig().proposer_max_turns == PROPOSER_MAX_TURNS
    assert ProposerContext().max_turns == PROPOSER_MAX_TURNS
    assert ProposerSettings().budget.max_turns == PROPOSER_MAX_TURNS
    # ... and the same token and time budgets (they were 400k / 1800 s here, 120k / 900 s in
    # the flywheel's admission).
    from autoenvscaling.graphs.proposer.builder import _settings_from
    from autoenvscaling.graphs.proposer.settings import proposer_budget

    assert ProposerSettings().budget == proposer_budget()
    assert _settings_from(ProposerContext()).budget == proposer_budget()
    assert inspect.signature(propose).parameters["max_turns"].default == PROPOSER_MAX_TURNS
    assert preset("embedded")["proposer_max_turns"] < PROPOSER_MAX_TURNS
    with pytest.raises(ValidationError):  # the loop has no turn limit of its own
        LoopBudget()


@pytest.mark.parametrize(
    ("given", "server", "embedded"),
    [
        ({}, "embedded", True),  # nothing named: the embedded default (Studio's default context)
        ({"policy_base_url": "http://127.0.0.1:8000/v1"}, "vllm", False),
        ({"policy_model": "openai:gpt-5"}, "none", False),
        ({"policy_server": "none"}, "none", False),
        ({"policy_server": "embedded", "policy_model": "scripted:x"}, "embedded", False),
    ],
)
def test_one_rule_names_the_policy_server(given, server, embedded):
    """`auto` (the default) resolves as `autoenvscaling run` always did; the graph starts the
    embedded server only for a context that names no model and no endpoint."""
    config = FlywheelContext(**given)
    assert (config.policy_server, config.embedded_default()) == (server, embedded)
    assert config.model_dump()["policy_server"] == server  # the manifest records what ran
