"""ARCHITECTURE.md says what the code does: its diagram is the compiled graph's, its folder table
is the import rule every module keeps (checked by parsing the real files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .architecture_doc import (
    DOC,
    REFRESH,
    current_block,
    diagram_block,
    flywheel_mermaid,
    import_rule,
    imports_of,
    violations,
)

FOLDERS = {"cli", "graphs", "mcp_servers", "prompts", "tools", "training", "viewer"}


@pytest.mark.timeout(180)
def test_flywheel_diagram_is_the_compiled_graph():
    expected = diagram_block(flywheel_mermaid())
    assert current_block(DOC.read_text()) == expected, (
        f"{DOC.name}'s flywheel diagram differs from the compiled graph: run `{REFRESH}` and "
        "commit the result"
    )


@pytest.mark.timeout(60)
def test_every_import_keeps_the_folder_table():
    rule = import_rule(DOC.read_text())
    assert set(rule) == FOLDERS, f"{DOC.name}'s folder table must list exactly {sorted(FOLDERS)}"
    assert rule["tools"].isdisjoint({"graphs", "cli", "training", "mcp_servers"})
    found = violations(rule)
    assert not found, (
        f"imports that break {DOC.name}'s folder table (move the code down a layer, or change "
        "the table with a reason):\n" + "\n".join(found)
    )


@pytest.mark.timeout(60)
def test_the_import_check_catches_an_upward_import(tmp_path: Path):
    rule = import_rule(DOC.read_text())
    for folder in FOLDERS:
        (tmp_path / folder).mkdir()
    (tmp_path / "tools" / "bad.py").write_text(
        "def f():\n"
        "    from ..graphs.flywheel import graph\n"
        "    import graphs.x\n"
        "    from autoenvscaling.tools import pool\n"
        'AGENT = "autoenvscaling.graphs.solver:SolverAgent"\n'
        "from ...outside import y\n"
    )
    (tmp_path / "graphs" / "ok.py").write_text(
        "from ..tools import pool\nfrom . import ok\nLABEL = 'autoenvscaling.owner'\n"
    )
    assert violations(rule, tmp_path) == [
        "tools/bad.py:2 imports autoenvscaling.graphs.flywheel (tools/ may not import graphs/)",
        "tools/bad.py:3 imports graphs.x: import it relatively",
        "tools/bad.py:4 imports autoenvscaling.tools: import the package relatively",
        "tools/bad.py:5 names autoenvscaling.graphs.solver (tools/ may not import graphs/)",
        "tools/bad.py:6 relative import ...outside climbs out of the package",
    ]


@pytest.mark.timeout(60)
def test_the_package_has_no_link_and_every_import_resolves_by_path():
    """What a tool that resolves imports by path sees: no symlink anywhere in the package's
    folders, and every import of the package (all relative) names a file or folder that is
    there; the arrows between the folders are drawn from those paths."""
    root = DOC.parent
    arrows: set[tuple[str, str]] = set()
    for path in (root / "autoenvscaling").rglob("*"):
        assert not path.is_symlink(), path
    for folder in FOLDERS:
        for path in (root / folder).rglob("*"):
            assert not path.is_symlink(), path
        for path in (root / folder).rglob("*.py"):
            for imp in imports_of(path, root):
                if imp.kind != "relative":
                    continue
                parts = imp.module.split(".")[1:]
                target = root.joinpath(*parts)
                resolved = target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()
                # `from .mod import name` names a module; `from . import name` may name an object.
                assert resolved or target.parent.joinpath("__init__.py").is_file(), (path, imp)
                if parts and parts[0] != folder:
                    arrows.add((folder, parts[0]))
    assert {("graphs", "tools"), ("cli", "graphs"), ("mcp_servers", "tools")} <= arrows, arrows


@pytest.mark.timeout(60)
def test_pyproject_maps_every_package_of_every_folder():
    """setuptools' package-dir maps the folders onto the package (wheels, editable installs);
    its package list is every folder's packages, no more."""
    import tomllib

    root = DOC.parent
    setuptools_cfg = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    expected = {"autoenvscaling"} | {
        "autoenvscaling." + init.parent.relative_to(root).as_posix().replace("/", ".")
        for folder in FOLDERS
        for init in (root / folder).rglob("__init__.py")
    }
    assert set(setuptools_cfg["packages"]) == expected
    assert setuptools_cfg["package-dir"] == {"autoenvscaling": "autoenvscaling"} | {
        f"autoenvscaling.{folder}": folder for folder in FOLDERS
    }
