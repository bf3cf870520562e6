"""ARCHITECTURE.md says what the code does: its diagram is the compiled graph's, its folder table
is the import rule every module keeps (checked by parsing the real files)."""

from __future__ import annotations

import ast
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


#: The heavy or optional third-party modules an import inside a function may name as it is (issue
#: 43, item 4), each with its reason, said once here. Every other import sits at its module's
#: top, or says why it cannot with a `# lazy: <why>` comment on its line or just above it (one
#: comment covers the run of imports under it). A name covers its submodules. The times are
#: `python -X importtime -c 'import X'` on the 2-core machine, cold process, warm disk cache.
HEAVY_OR_OPTIONAL = {
    # The train extra: only the training workers, in processes of their own, load it; the graph
    # process, the CLI and the servers never do.
    "torch": "the train extra: ~1.8 s",
    "transformers": "the train extra: ~2.9 s (with torch)",
    "trl": "the train extra: ~0.9 s, and torch with transformers once its trainers load",
    "peft": "the train extra: ~7 s (torch, transformers)",
    "accelerate": "the train extra: ~1.5 s (torch)",
    "datasets": "the train and dev extras: ~0.7 s (pyarrow, pandas); exports and trainers only",
    # The embedded extra: llama-cpp-python[server], a compiled llama.cpp and the FastAPI it serves.
    "llama_cpp": "the embedded extra (a compiled library); only the policy server's process",
    "fastapi": "the embedded extra's server: ~0.25 s",
    # The postgres extra: a rollout store or checkpointer on a PostgreSQL server.
    "psycopg": "the postgres extra",
    "langgraph.checkpoint.postgres": "the postgres extra",
    # A dependency, too heavy for every process that imports the reports.
    "matplotlib": "~0.3 s, pyplot ~0.5 s; only drawing a report needs it",
}


Imports = ast.Import | ast.ImportFrom


def _imports_away_from_the_top(tree: ast.Module) -> list[Imports]:
    """Each import statement inside a function or class body, `if TYPE_CHECKING:` blocks left
    out (they never run)."""
    found: list[Imports] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit_one(other, nested)
            else:
                visit_one(child, nested)

    def visit_one(node: ast.AST, nested: bool) -> None:
        if isinstance(node, Imports):
            if nested:
                found.append(node)
            return
        scopes = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
        visit(node, nested or isinstance(node, scopes))

    visit(tree, False)
    return found


def _is_heavy(node: Imports) -> bool:
    if isinstance(node, ast.ImportFrom):
        names = [] if node.level else [node.module or ""]
    else:
        names = [alias.name for alias in node.names]
    return bool(names) and all(
        any(name == heavy or name.startswith(heavy + ".") for heavy in HEAVY_OR_OPTIONAL)
        for name in names
    )


def _gives_a_reason(lines: list[str], first: int, last: int, import_lines: set[int]) -> bool:
    """A `# lazy:` comment on the statement's lines (1-based, `first`..`last`), or among the
    comment lines just above it, or above the run of imports it closes."""
    if any("# lazy:" in lines[i - 1] for i in range(first, last + 1)):
        return True
    above = first - 1
    while above >= 1:
        text = lines[above - 1].lstrip()
        if text.startswith("# lazy:"):
            return True
        if not (text.startswith("#") or above in import_lines):
            return False
        above -= 1
    return False


def lazy_import_offenders(repo: Path = DOC.parent) -> list[str]:
    """'file:line statement' for each import inside a function (or class) of the package's
    folders that names no heavy or optional module and gives no `# lazy:` reason."""
    out: list[str] = []
    for folder in sorted(FOLDERS):
        for path in sorted((repo / folder).rglob("*.py")):
            text = path.read_text()
            lines = text.splitlines()
            tree = ast.parse(text, filename=str(path))
            import_lines = {
                line
                for node in ast.walk(tree)
                if isinstance(node, Imports)
                for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
            }
            for node in _imports_away_from_the_top(tree):
                end = node.end_lineno or node.lineno
                if not _is_heavy(node) and not _gives_a_reason(
                    lines, node.lineno, end, import_lines
                ):
                    rel = path.relative_to(repo).as_posix()
                    out.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    return out


@pytest.mark.timeout(60)
def test_imports_sit_at_the_top_unless_heavy_or_a_reason_is_given():
    found = lazy_import_offenders()
    assert not found, (
        f"{len(found)} imports inside a function: move each to its module's top (ruff sorts "
        "them), or, where that would make an import circle or load something heavy, say why "
        "with a `# lazy: <why>` comment on its line or just above it (a heavy or optional "
        "third-party module goes in HEAVY_OR_OPTIONAL, with its reason, instead):\n"
        + "\n".join(found)
    )


@pytest.mark.timeout(60)
def test_every_heavy_module_listed_is_imported_lazily_somewhere():
    # The list stays short and true: a module no function imports any more leaves it.
    root = DOC.parent
    named: set[str] = set()
    for folder in FOLDERS:
        for path in (root / folder).rglob("*.py"):
            for node in _imports_away_from_the_top(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    named |= {alias.name for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    named.add(node.module or "")
    unused = {
        heavy
        for heavy in HEAVY_OR_OPTIONAL
        if not any(name == heavy or name.startswith(heavy + ".") for name in named)
    }
    assert not unused, f"HEAVY_OR_OPTIONAL lists modules no function imports: {sorted(unused)}"


@pytest.mark.timeout(60)
def test_the_lazy_import_check_catches_an_import_without_a_reason(tmp_path: Path):
    for folder in FOLDERS:
        (tmp_path / folder).mkdir()
    (tmp_path / "tools" / "mod.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import os\n"
        "if TYPE_CHECKING:\n"
        "    from .other import Never\n"
        "def f():\n"
        "    import json\n"  # 6: no reason
        "    import torch\n"  # heavy
        "    from matplotlib import pyplot\n"  # heavy, a submodule
        "    from .sibling import thing  # lazy: import circle tools.mod <-> tools.sibling\n"
        "    # lazy: docker's SDK only for the doctor (200 ms)\n"
        "    # (a second line of the reason)\n"
        "    import docker\n"
        "    from .sibling import (\n"  # the run under the comment above
        "        other,\n"
        "    )\n"
        "    x = 1\n"
        "    from .sibling import late\n"  # 17: the statement above breaks the run
        "    import torch, json\n"  # 18: json is not heavy
        "class C:\n"
        "    from .sibling import attr\n"  # 20: a class body is not the top either
        "    def g(self):\n"
        "        if TYPE_CHECKING:\n"
        "            from .other import Never\n"
        "        lam = lambda: __import__('x')\n"
        "        from torchvision import ops\n"  # 25: not torch
        "        from . import (  # lazy: circle\n"
        "            sibling,\n"
        "        )\n"
    )
    assert lazy_import_offenders(tmp_path) == [
        "tools/mod.py:6 import json",
        "tools/mod.py:17 from .sibling import late",
        "tools/mod.py:18 import torch, json",
        "tools/mod.py:20 from .sibling import attr",
        "tools/mod.py:25 from torchvision import ops",
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
