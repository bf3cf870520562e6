"""The `autoenvscaling` command as a click command: what the docs' CLI reference is generated from
(mkdocs-click reads its commands, options and help, so the page cannot drift from the code)."""

import typer

from .main import app

command = typer.main.get_command(app)
