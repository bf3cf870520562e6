"""What lint reports (findings, the report) and what its rules share: the findings collected so far, a
best-effort view of the task folder.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harbor.models.task.config import TaskConfig
from harbor.models.task.task import strip_canary
from pydantic import BaseModel, Field

Severity = Literal["error", "warning"]


class LintFinding(BaseModel):
    rule: str = Field(description="kebab-case rule id, e.g. 'image-test-leak'")
    severity: Severity
    file: str = Field(description="path relative to the task folder")
    line: int | None = None
    message: str = Field(description="what is wrong and what to change")

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: [{self.rule}] {self.message}"


class LintReport(BaseModel):
    task: str
    ok: bool = Field(description="no finding of severity 'error'")
    findings: list[LintFinding] = Field(default_factory=list)

    @property
    def errors(self) -> list[LintFinding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[LintFinding]:
        return [f for f in self.findings if f.severity == "warning"]

    def summary(self) -> str:
        """One line per finding, errors first: the text a proposer gets back."""
        ordered = self.errors + self.warnings
        return "\n".join(f"{f.severity}: {f}" for f in ordered) or "lint: no findings"


class LintContext:
    """Per-run state: the task root and the findings collected so far."""

    def __init__(self, root: Path):
        self.root = root
        self.findings: list[LintFinding] = []

    def rel(self, path: Path | str) -> str:
        path = Path(os.path.abspath(path))  # never follow a link out of the task
        try:
            return path.relative_to(self.root).as_posix() or "."
        except ValueError:
            return path.name or "."

    def add(
        self, rule: str, severity: Severity, file: Path | str, message: str, line: int | None = None
    ) -> None:
        self.findings.append(
            LintFinding(
                rule=rule, severity=severity, file=self.rel(file), line=line, message=message
            )
        )


@dataclass(frozen=True)
class TaskView:
    """Best-effort view of a task folder, so the rules run even when the format checks fail."""

    root: Path
    instruction: str | None
    environment_dir: Path
    dockerfile: Path | None
    tests_dir: Path
    test_script: Path | None
    solution_dir: Path | None
    workdir: str | None  # [environment].workdir

    @classmethod
    def of(cls, root: Path) -> TaskView:
        def text(path: Path) -> str | None:
            try:
                return path.read_text(encoding="utf-8") if path.is_file() else None
            except (UnicodeDecodeError, OSError):
                return None

        instruction = text(root / "instruction.md")
        workdir = None
        try:
            raw = tomllib.loads(text(root / "task.toml") or "")
            workdir = TaskConfig.model_validate(raw).environment.workdir
        except (tomllib.TOMLDecodeError, ValueError, RecursionError):
            workdir = None  # invalid config is reported by the format checks
        dockerfile = root / "environment" / "Dockerfile"
        test_script = root / "tests" / "test.sh"
        return cls(
            root=root,
            instruction=strip_canary(instruction) if instruction is not None else None,
            environment_dir=root / "environment",
            dockerfile=dockerfile if text(dockerfile) is not None else None,
            tests_dir=root / "tests",
            test_script=test_script if text(test_script) is not None else None,
            solution_dir=root / "solution",
            workdir=workdir,
        )
