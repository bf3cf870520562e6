"""Whose "no" a rejection is: the task is wrong, this machine cannot run it, or the infrastructure
failed.

- `task_wrong`: the task itself is broken (lint error, a build that fails on its own commands, a
  solution that does not pass its tests...). The only kind that costs a proposer -1.
- `cannot_run_here`: the task may well be right, but this machine lacks what it needs: a base
  image the engine does not hold and no registry serves, the internet it fetches from, GPUs, a
  compose file the backend cannot start. Each `Missing` says what and how to provide it.
- `infrastructure`: the engine, a sandbox or the harness failed; rerun when fixed.

A proposer is told which bases exist and that it gets no internet (prompts/proposer_rules.md), so
for a proposer a missing base image or network is its own fault (`gpu.scored_for_proposer`); an
imported task is only told what to provide.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..sandbox.base import DEFAULT_BACKEND
from ..sandbox.engine import client
from ..sandbox.harbor_backends import our_engine
from ..sandbox.image_tags import image_id, parent_images
from .network import Phase, network_need

Kind = Literal["task_wrong", "cannot_run_here", "infrastructure"]
Need = Literal["base_image", "internet", "gpus", "compose"]

#: What a proposer's brief states (prompts/proposer_rules.md: `FROM debian:bookworm-slim`, one
#: Dockerfile, no internet, no GPU): for these a proposer's task is wrong, not unrunnable. Were it
#: spared the -1, a policy could add any of them to dodge every rejection.
BRIEFED_NEEDS: frozenset[Need] = frozenset({"base_image", "internet", "gpus", "compose"})


class Missing(BaseModel):
    """One thing this machine lacks that the task needs."""

    need: Need
    what: str = Field(description="exactly what is missing, e.g. 'base image ubuntu:24.04'")
    provide: str = Field(description="how to provide it here")

    def __str__(self) -> str:
        return f"{self.what} (provide: {self.provide})"


def missing_base_images(images: list[str], present: set[str], backend: str) -> list[Missing]:
    """A Missing for each FROM image not in `present` (the names the engine holds)."""
    cli = our_engine(backend) or DEFAULT_BACKEND
    return [
        Missing(
            need="base_image",
            what=f"base image {image} (not in the {backend} engine, and no registry served it)",
            provide=f"`{cli} pull {image}` where a registry answers, or `{cli} load -i "
            f"<archive>.tar` from a saved copy; if the Dockerfile needs only Debian packages, tag "
            f"the project's offline Debian base as it: python -m "
            f"autoenvscaling.tools.sandbox.bases --engine {cli} {image}",
        )
        for image in images
        if image not in present
    ]


def _engine_images(task: Path, backend: str) -> list[Missing]:
    """The FROM images of the task the engine does not hold (engine query; [] on no engine)."""
    engine = our_engine(backend)
    if engine is None:
        return []
    images = parent_images(task / "environment" / "Dockerfile")
    try:
        api = client(engine).api
        present = {i for i in images if image_id(api, i) is not None}
    except Exception:  # noqa: BLE001 - no engine to ask: say nothing rather than guess
        return []
    return missing_base_images(images, present, backend)


def missing_network(task: Path, allow_internet: bool, *phases: Phase) -> list[Missing]:
    need = network_need(task, allow_internet=allow_internet)
    if not need.in_phase(*phases) or need.granted:
        return []
    if need.declared:
        provide = (
            "run the gate with --allow-internet (GateConfig.allow_internet) on a machine with a "
            "network, or vendor what it fetches into the task"
        )
    else:
        provide = (
            "vendor what it fetches into environment/ (wheels, a pinned runner, packages in the "
            "image), or declare [environment] allow_internet = true and run the gate with "
            "--allow-internet on a machine with a network"
        )
    return [Missing(need="internet", what=need.fetched(*phases), provide=provide)]


async def missing_for(
    stage: str,
    task: Path,
    details: dict[str, object],
    *,
    backend: str,
    allow_internet: bool,
) -> list[Missing]:
    """What this machine lacks that made `stage` fail on `task`; [] when the task is to blame.

    Asked only of a failed stage that was no infrastructure failure. A build that failed with a
    FROM image the engine lacks is unrunnable here whatever else it does; a build or an oracle
    whose failure the stage already laid on a fetch (`details["network_need"]`) lacks the
    network."""
    if stage == "build":
        images = await asyncio.to_thread(_engine_images, task, backend)
        if images:
            return images
        if details.get("network_need"):
            return await asyncio.to_thread(missing_network, task, allow_internet, "build")
    if stage == "oracle" and details.get("network_need"):
        return await asyncio.to_thread(
            missing_network, task, allow_internet, "verifier", "solution"
        )
    if stage == "lint":
        return lint_missing(details)
    return []


def lint_missing(details: dict[str, object]) -> list[Missing]:
    """Lint failed only on what the backend cannot honour (compose, GPUs): unrunnable here."""
    findings = details.get("findings")
    if not isinstance(findings, list):
        return []
    errors = [f for f in findings if isinstance(f, dict) and f.get("severity") == "error"]
    # Harbor's own compose checks need the Docker CLI: a tool this machine lacks, not a defect.
    tooling = [f for f in errors if f.get("rule") == "harbor-lint" and _NO_DOCKER_CLI in str(f)]
    honour = [f for f in errors if f.get("rule") == "cannot-honour"]
    if not honour or len(honour) + len(tooling) != len(errors):
        return []
    out = []
    for finding in honour:
        message = str(finding.get("message", ""))
        need: Need = "gpus" if "gpus" in message else "compose"
        out.append(Missing(need=need, what=message.split(";")[0], provide=message))
    return out


_NO_DOCKER_CLI = "require the Docker CLI"


def sentence(missing: list[Missing]) -> str:
    """One line for a verdict: what is missing and how to provide each."""
    return "cannot run on this machine: " + "; ".join(str(m) for m in missing)
