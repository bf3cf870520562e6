"""Chat models for both roles, by `init_chat_model` strings, plus the shared policy both roles use.

One policy endpoint (vLLM, the embedded llama.cpp server or any OpenAI-compatible server) serves
proposer and solver; either role may be overridden (e.g. a frontier proposer). `scripted:<name>`
resolves to a scripted model (tests and offline demos): the only thing that may be scripted.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, Field

from .agent.scripted_model import load_scripted

if TYPE_CHECKING:
    from ..training.checkpoints import Checkpoint
    from ..training.policy import PolicyServer


class Policy(BaseModel):
    """The model both roles use this round; the training node replaces it with a new checkpoint."""

    model: str = Field(
        default="openai:policy", description="init_chat_model string, e.g. openai:policy"
    )
    base_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint (vLLM, llama.cpp)"
    )
    checkpoint_id: str | None = Field(
        default=None, description="Registry id of the served checkpoint"
    )
    version: str = Field(default="base", description="Recorded with every rollout")
    tool_choice: str | None = Field(default=None, description="See ModelConfig.tool_choice")

    @classmethod
    def serving(
        cls, model: str, base_url: str | None, tool_choice: str | None, checkpoint_id: str | None
    ) -> Policy:
        """The one way a policy is built: `model` at `base_url`, from checkpoint `checkpoint_id`
        (None: the base model), the version its rollouts record."""
        return cls(
            model=model,
            base_url=base_url,
            tool_choice=tool_choice,
            checkpoint_id=checkpoint_id,
            version=checkpoint_id or "base",
        )


class ModelConfig(BaseModel):
    """How one role calls its model."""

    model: str = "openai:policy"
    base_url: str | None = None
    api_key_env: str = Field(
        default="OPENAI_API_KEY", description="Env var holding the key ('none' if unset)"
    )
    temperature: float = 0.7
    max_tokens: int = Field(default=1024, description="Cap on one reply")
    context_window: int | None = Field(
        default=None,
        description="Tokens the model attends to (prompt + reply); None = unknown: prompts "
        "are not fitted",
    )
    timeout_sec: float = 180
    max_retries: int = Field(
        default=2, description="Retries with exponential backoff before an error outcome"
    )
    tool_choice: str | None = Field(
        default=None,
        description="Sent with tool calls; 'auto' makes llama.cpp constrain replies to a call",
    )
    extra: dict[str, Any] = Field(default_factory=dict, description="More init_chat_model kwargs")

    @classmethod
    def for_policy(cls, policy: Policy, override: ModelConfig | None = None) -> ModelConfig:
        """A role's config: the shared policy unless this role is configured apart."""
        if override is not None:
            return override
        return cls(model=policy.model, base_url=policy.base_url, tool_choice=policy.tool_choice)


def load_chat_model(config: ModelConfig) -> BaseChatModel:
    if config.model.startswith("scripted:"):
        return load_scripted(config.model.removeprefix("scripted:"))

    kwargs: dict[str, Any] = {
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "timeout": config.timeout_sec,
        "max_retries": 0,  # retries are ours (with backoff), so failures are recorded
        **config.extra,
    }
    if config.base_url:
        kwargs["base_url"] = config.base_url
        kwargs["api_key"] = os.environ.get(config.api_key_env) or "none"
    return init_chat_model(config.model, **kwargs)


async def adopt_checkpoint(checkpoint: Checkpoint, server: PolicyServer, current: Policy) -> Policy:
    """Serve `checkpoint` and return the policy both roles use from now on."""
    ref = await server.activate(checkpoint)
    return Policy.serving(ref.chat_model, ref.base_url, current.tool_choice, checkpoint.id)
