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
        "def f():\n    from autoenvscaling.graphs.flywheel import graph\n    import graphs.x\n"
    )
    (tmp_path / "graphs" / "ok.py").write_text("from autoenvscaling.tools import pool\n")
    assert violations(rule, tmp_path) == [
        "tools/bad.py:2 imports autoenvscaling.graphs.flywheel (tools/ may not import graphs/)",
        "tools/bad.py:3 imports graphs.x: write autoenvscaling.graphs.x",
    ]


@pytest.mark.timeout(60)
def test_every_package_import_path_is_a_real_path():
    """The layout static tools resolve: autoenvscaling/<folder> is a relative link to <folder>."""
    root = DOC.parent
    for folder in FOLDERS:
        link = root / "autoenvscaling" / folder
        assert link.is_symlink() and link.readlink() == Path("..") / folder, link
        assert (link / "__init__.py").is_file()


@pytest.mark.timeout(60)
def test_setuptools_finds_every_package_through_the_links():
    """pyproject's package discovery (what wheels and editable installs use) reaches every
    package of every folder through autoenvscaling/."""
    import tomllib

    from setuptools import find_packages

    root = DOC.parent
    setuptools_cfg = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set(find_packages(where=str(root), **setuptools_cfg["packages"]["find"]))
    expected = {"autoenvscaling"} | {
        "autoenvscaling." + init.parent.relative_to(root).as_posix().replace("/", ".")
        for folder in FOLDERS
        for init in (root / folder).rglob("__init__.py")
    }
    assert found == expected
