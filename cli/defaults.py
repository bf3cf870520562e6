"""One default model for every command that needs one: the embedded policy, as `run` uses.

`solve`, `propose` and `validate --calibrate-with-policy` given no `--model` and no `--base-url`
start the embedded server (SmolLM2-135M-Instruct behind a local OpenAI-compatible endpoint, set
up once per machine) for the command and stop it when the command ends, crash or Ctrl-C
included. `resolved.model` is what answered; commands print it and put it in `--json`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import BaseModel, Field
from rich.console import Console

#: The remote policy name a user gets when they pass only --base-url (a vLLM or other server).
REMOTE_DEFAULT = "openai:policy"


class ResolvedModel(BaseModel):
    model: str = Field(description="init_chat_model string that answers.")
    base_url: str | None = None
    tool_choice: str | None = None
    embedded: bool = Field(
        default=False, description="The embedded default, started for this command."
    )
    label: str = Field(default="", description="What answered, for people and --json output.")


@contextmanager
def model_or_embedded(
    model: str | None, base_url: str | None, console: Console
) -> Iterator[ResolvedModel]:
    """The user's model, or the embedded default running for the duration of the block."""
    if model is not None or base_url is not None:
        name = model or REMOTE_DEFAULT
        yield ResolvedModel(model=name, base_url=base_url, label=name)
        return
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..training.serving.embedded_server import EmbeddedLlamaServer
    from ..training.serving.embedded_setup import ensure_embedded_assets

    console.print(
        "no --model given: using the embedded default policy (SmolLM2-135M-Instruct on a local "
        "server; the first set-up on a machine fetches ~100 MB, later starts take ~2 s)"
    )
    assets = ensure_embedded_assets(with_converter=False, progress=console.print)
    server = EmbeddedLlamaServer(model_path=assets.model_path)
    ref = server.start()
    try:
        yield ResolvedModel(
            model=ref.chat_model,
            base_url=ref.base_url,
            tool_choice="auto",  # llama.cpp then constrains replies to a parseable tool call
            embedded=True,
            label=f"embedded {assets.model_path.name} (served as {ref.chat_model})",
        )
    finally:
        server.stop()
