"""Command-line options more than one command declares, written once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

BackendOpt = Annotated[
    str,
    typer.Option(
        "--backend",
        "-b",
        help="podman | docker | harbor-docker | harbor:<type> (e.g. harbor:modal)",
    ),
]
HarborEnvOpt = Annotated[
    Path | None,
    typer.Option(
        "--harbor-env",
        help="JSON file of Harbor EnvironmentConfig fields passed through "
        '(e.g. {"kwargs": {...}, "override_cpus": 2}) for a harbor:<type> backend',
        exists=True,
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        help="init_chat_model string (openai:NAME for vLLM); default: the embedded policy"
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
