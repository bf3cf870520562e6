"""A task-family generator: compact Harbor tasks made from a family (one skill) and a seed.

One family is one skill (count lines, sum numbers, read a config value...); its seed picks the
variant: the file names, the values, the input's format, the wording of the instruction. Every
variant has the starter pool's shape (tasks/starter/README.md): five short files, solved by one
shell command with the base tools, on `FROM debian:bookworm-slim`, offline, a binary verifier.

`write_split(folder, families, seeds, avoid=...)` writes one split (a folder of task folders):
a seed whose variant shares content with `avoid` (the other splits: same bytes, a shared word
13-gram in the instruction, or a near-duplicate by the gate's MinHash) is skipped and the next
seed drawn, so splits written from disjoint seed ranges are disjoint by content as well as by
seed; tools/tasks/splits.py checks it again on the folders themselves.

    python -m autoenvscaling.tools.tasks.generator OUT --split heldout --per-family 2
"""

from __future__ import annotations

import argparse
import random
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from .families import (
    FAMILIES,
    SKILL_FAMILIES,
    TaskParts,
    printf_text,
)

#: The seed ranges of the shipped splits: disjoint, so no instance is drawn twice. `pool` and
#: `heldout` are the embedded preset's; `learn-train` and `learn-heldout` the learning
#: demonstration's (the `learn` preset: one skill, many variants; tasks/generated/README.md).
SPLIT_SEEDS: dict[str, range] = {
    "pool": range(0, 10_000),
    "heldout": range(10_000, 20_000),
    "learn-train": range(20_000, 30_000),
    "learn-heldout": range(30_000, 40_000),
}

_TOML = """schema_version = "1.4"
artifacts = ["/app"]

[metadata]
author_name = "autoenvscaling generator"
difficulty = "easy"
category = "{category}"
tags = ["generated", "{family}"]

[agent]
timeout_sec = 120

[verifier]
environment_mode = "separate"
timeout_sec = 60

[environment]
network_mode = "no-network"
cpus = 1
memory_mb = 512
build_timeout_sec = 120
"""


class TaskVariant(BaseModel):
    """One generated task: its folder name and its files (path relative to the task folder)."""

    family: str
    seed: int
    name: str
    files: dict[str, str] = Field(description="relative path -> text")

    def write(self, root: Path) -> Path:
        folder = root / self.name
        if folder.exists():
            shutil.rmtree(folder)
        for rel, text in self.files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if rel.endswith(".sh"):
                path.chmod(0o755)
        return folder


def _assemble(family: str, seed: int, parts: TaskParts) -> TaskVariant:
    setup = "".join(
        f"RUN printf {printf_text(content)} > {path}\n" for path, content in parts.inputs.items()
    )
    test = (
        "#!/bin/bash\n"
        f"# Verifier ({family}, variant {seed}): {parts.about}.\n"
        "mkdir -p /logs/verifier\n"
        "echo 0 > /logs/verifier/reward.txt\n"
        f"{parts.check} && echo 1 > /logs/verifier/reward.txt\n"
        "cat /logs/verifier/reward.txt\n"
    )
    return TaskVariant(
        family=family,
        seed=seed,
        name=f"{family}-{seed:05d}",
        files={
            "instruction.md": parts.instruction + "\n",
            "task.toml": _TOML.format(category=parts.category, family=family),
            "environment/Dockerfile": f"FROM debian:bookworm-slim\nWORKDIR /app\n{setup}",
            "solution/solve.sh": f"#!/bin/bash\n{parts.solve}\n",
            "tests/test.sh": test,
        },
    )


def generate(family: str, seed: int) -> TaskVariant:
    """The variant `seed` of `family`: the same bytes for the same pair, on any machine."""
    if family not in FAMILIES:
        raise KeyError(f"unknown task family {family!r}; families: {', '.join(FAMILIES)}")
    rng = random.Random(f"{family}:{seed}")
    return _assemble(family, seed, FAMILIES[family](rng))


def write_split(
    folder: Path,
    families: Iterable[str],
    seeds: range,
    per_family: int,
    *,
    avoid: Sequence[Path] = (),
) -> list[TaskVariant]:
    """Write `per_family` variants of each family into `folder`, drawn from `seeds` in order;
    a variant that overlaps a task under `avoid` (tools/tasks/splits.py) is skipped."""
    # lazy: splits loads datasketch (scipy, numpy: ~1 s), which generate() alone never needs
    from .splits import SplitIndex

    index = SplitIndex.of_folders(avoid)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[TaskVariant] = []
    for family in families:
        kept = 0
        for seed in seeds:
            if kept == per_family:
                break
            variant = generate(family, seed)
            path = variant.write(folder)
            if index.clashes(path):
                shutil.rmtree(path)
                continue
            written.append(variant)
            kept += 1
        if kept < per_family:
            raise ValueError(f"{family}: only {kept} variants in {seeds} avoid {list(avoid)}")
    return written


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the split's folder (its tasks are replaced)")
    parser.add_argument("--split", choices=sorted(SPLIT_SEEDS), required=True)
    parser.add_argument("--per-family", type=int, default=2)
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES))
    parser.add_argument("--avoid", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    written = write_split(
        args.out,
        args.family or list(SKILL_FAMILIES),
        SPLIT_SEEDS[args.split],
        args.per_family,
        avoid=args.avoid,
    )
    print(f"{len(written)} tasks in {args.out}: {', '.join(v.name for v in written)}")


if __name__ == "__main__":
    main()
