"""The proposer's prompts: the arm's system prompt, the brief, the revision after a rejection,
and the first prompt fitted into the model's context window."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ...prompts import load_prompt
from ...tools.agents.brief import TRIM_LEVELS, ProposerBrief
from ...tools.agents.prompt_fit import (
    prompt_tokens,
    reply_cap,
    reply_reserve,
    too_large,
)
from ...tools.gate import Verdict
from ..models import ModelConfig
from .settings import Arm


def system_prompt(arm: Arm, band: tuple[float, float], *, compact: bool = False) -> str:
    """The arm's system prompt; `compact`: the short variant for small context windows."""
    if compact:
        return load_prompt(f"proposer_{arm}_compact").format(
            band_low=f"{band[0]:g}", band_high=f"{band[1]:g}"
        )
    rules = load_prompt("proposer_rules").format(band_low=f"{band[0]:g}", band_high=f"{band[1]:g}")
    return load_prompt(f"proposer_{arm}").format(
        rules=rules, files_format=load_prompt("proposer_files_format")
    )


def brief_prompt(brief: ProposerBrief) -> str:
    sections = brief.sections()
    evidence = ""
    if brief.solver_feedback:
        evidence = load_prompt("proposer_evidence").format(
            policy_version=brief.policy_version or "current", **sections
        )
    text = load_prompt("proposer_brief").format(
        round=brief.round,
        pool_size=brief.pool_size,
        pool=sections["pool"],
        domains=sections["domains"],
        evidence=evidence,
        examples=sections["examples"] or "(none)",
    )
    if brief.focus:
        text += "\n" + load_prompt("proposer_focus").format(focus=brief.focus)
    return text


class FittedPrompt(BaseModel):
    """The first prompt as sent: what was trimmed to fit the window, and the reply's cap."""

    system: str
    brief: str
    trim_level: int = Field(default=0, description="ProposerBrief.trimmed level; 0 = untouched")
    compact_system: bool = False
    estimated_tokens: int | None = Field(default=None, description="None: the window is unknown")
    max_tokens: int = Field(description="Cap on one reply, within what the window leaves")


#: Arms with a compact system prompt (prompts/proposer_<arm>_compact.md).
COMPACT_ARMS: tuple[Arm, ...] = ("terminal",)


def fit_first_prompt(
    brief: ProposerBrief,
    arm: Arm,
    band: tuple[float, float],
    model: ModelConfig,
    tools: list[dict[str, Any]] | None = None,
    *,
    compact: bool = False,
) -> FittedPrompt:
    """The system prompt and brief, fitted into `model.context_window`, a quarter of it left free.

    Unknown window: both untouched. Known: the brief's evidence is trimmed level by level
    (fewer failures, shorter excerpts, fewer examples), then the same with the compact system
    prompt; raises ContextWindowError when even the smallest does not fit. `compact`: the
    compact system prompt from the start (a small policy's; the embedded preset's)."""
    compact = compact and arm in COMPACT_ARMS
    window = model.context_window
    if window is None:
        return FittedPrompt(
            system=system_prompt(arm, band, compact=compact),
            brief=brief_prompt(brief),
            compact_system=compact,
            max_tokens=model.max_tokens,
        )
    reserve = reply_reserve(window)
    smallest = 0
    choices = (True,) if compact else (False, True) if arm in COMPACT_ARMS else (False,)
    for compact in choices:
        system = system_prompt(arm, band, compact=compact)
        for level in range(len(TRIM_LEVELS)):
            text = brief_prompt(brief.trimmed(level))
            needed = prompt_tokens([system, text], tools)
            smallest = needed
            if needed + reserve <= window:
                return FittedPrompt(
                    system=system,
                    brief=text,
                    trim_level=level,
                    compact_system=compact,
                    estimated_tokens=needed,
                    max_tokens=reply_cap(needed, model.max_tokens, window),
                )
    raise too_large("proposer", smallest, window, reserve)


def revision_prompt(arm: Arm, verdict: Verdict, revision: int, max_revisions: int) -> str:
    name = "proposer_revision" if arm == "terminal" else "proposer_revision_files"
    return load_prompt(name).format(
        revision=revision,
        max_revisions=max_revisions,
        stage=verdict.stage or "-",
        reason=verdict.reason,
        excerpt=verdict.excerpt.strip() or "(no output)",
    )
