"""`tools/` shows its inside: ARCHITECTURE.md's *Inside `tools/`* table names every sub-package
and top-level module there is (and nothing else), and no module grows past ~400 lines unless it
is one idea, named here with the reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / "tools"
MAX_LINES = 400
#: Modules over MAX_LINES that hold one idea each, and why they stay whole.
ONE_IDEA = {
    "gate/anti_cheat/audit.py": "one Harbor agent: the oracle's audit trial, step by step",
    "tasks/format.py": "the task format: its models and the checks that load and write it",
    "sandbox/container.py": "one class: the sandbox contract on a container engine",
    "files/rooted.py": "one class: the rooted filesystem's operations",
}


def documented_parts() -> set[str]:
    text = (REPO / "ARCHITECTURE.md").read_text()
    section = text.split("### Inside `tools/`", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE))


def actual_parts() -> set[str]:
    packages = {
        f"{init.parent.relative_to(TOOLS).as_posix()}/"
        for init in TOOLS.rglob("__init__.py")
        if init.parent != TOOLS
    }
    modules = {p.name for p in TOOLS.glob("*.py") if p.name != "__init__.py"}
    return packages | modules


@pytest.mark.timeout(30)
def test_architecture_lists_every_part_of_tools():
    documented, actual = documented_parts(), actual_parts()
    assert documented == actual, (
        "ARCHITECTURE.md's *Inside `tools/`* table and tools/ disagree: "
        f"missing from the table {sorted(actual - documented)}, "
        f"not in tools/ {sorted(documented - actual)}"
    )


@pytest.mark.timeout(30)
def test_no_module_of_tools_holds_several_ideas():
    sizes = {
        p.relative_to(TOOLS).as_posix(): len(p.read_text().splitlines())
        for p in TOOLS.rglob("*.py")
    }
    large = {name for name, lines in sizes.items() if lines > MAX_LINES}
    assert large <= set(ONE_IDEA), (
        f"modules over {MAX_LINES} lines: {sorted(large - set(ONE_IDEA))}; split them by idea "
        "(or, for one idea, add them to ONE_IDEA with the reason)"
    )
    assert set(ONE_IDEA) <= set(sizes), f"ONE_IDEA names modules that are gone: {ONE_IDEA}"
