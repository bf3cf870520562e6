"""The house's structure, read from the source: no import circles in tools/, no private name
imported across modules, no engine-name branch outside the sandbox package (issue 42, item 5).

Imports are read with `ast`, so a circle is found before anything runs. An import inside a
function counts (it still ties the two modules together); one under `if TYPE_CHECKING:` does not
(it never runs). A module importing its own package's `__init__` is Python's order, not a circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pytest

from autoenvscaling.tools.sandbox.base import Backend

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "autoenvscaling"
ENGINES = set(get_args(Backend))  # the engine names, from the contract


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def modules(folder: str) -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / folder).rglob("*.py"))}


def _runtime_nodes(tree: ast.Module) -> Iterator[ast.AST]:
    """Every node that runs: what sits under `if TYPE_CHECKING:` is left out."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imported(name: str, path: Path) -> Iterator[tuple[str, list[str]]]:
    """(module imported, names taken from it) for each import `path` runs."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            yield base, [alias.name for alias in node.names]


def import_graph(folder: str) -> dict[str, set[str]]:
    """Module -> the modules of `folder` it imports (a submodule taken with `from pkg import
    sub` counts as `pkg.sub`)."""
    known = modules(folder)

    def resolve(target: str) -> str | None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target or None

    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for base, names in imported(name, path):
            targets = [f"{base}.{n}" for n in names if f"{base}.{n}" in known] or [base]
            for target in map(resolve, targets):
                if target and target != name and not name.startswith(f"{target}."):
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def describe(graph: dict[str, set[str]], component: list[str]) -> str:
    inside = set(component)
    return "; ".join(f"{a} -> {b}" for a in component for b in sorted(graph[a] & inside))


def test_the_circle_finder_finds_a_circle_and_reads_imports_as_python_runs_them(tmp_path):
    # The checker itself, on a known shape: a -> b -> c -> a is one circle; d -> a is not in it.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import x.y\n"
        "if TYPE_CHECKING:\n    import never.runs\n"
        "def f():\n    from .sibling import thing\n"
    )
    found = dict(imported(f"{PACKAGE}.pkg.mod", source))
    assert "x.y" in found and f"{PACKAGE}.pkg.sibling" in found and "never.runs" not in found


def test_tools_has_no_import_circle():
    graph = import_graph("tools")
    assert len(graph) > 100  # the whole of tools/ was read, its arrows too
    assert "autoenvscaling.tools.sandbox.builders" in graph["autoenvscaling.tools.sandbox.images"]
    found = circles(graph)
    assert found == [], "\n".join(describe(graph, c) for c in found)


def test_the_sandbox_contract_imports_none_of_its_implementations():
    graph = import_graph("tools")
    contract = graph["autoenvscaling.tools.sandbox.base"]
    assert not {m for m in contract if m.startswith("autoenvscaling.tools.sandbox.")}, contract
    # Settings sit below every engine: they read the contract's names, nothing more.
    settings = graph["autoenvscaling.tools.settings"]
    sandbox = {m for m in settings if m.startswith("autoenvscaling.tools.sandbox")}
    assert sandbox == {"autoenvscaling.tools.sandbox.base"}, settings


@pytest.mark.parametrize("folder", ["tools", "graphs", "training", "mcp_servers", "cli", "viewer"])
def test_no_private_name_is_imported_from_another_module(folder):
    offenders = []
    for name, path in modules(folder).items():
        for base, names in imported(name, path):
            if base.startswith(PACKAGE):
                offenders += [f"{name}: from {base} import {n}" for n in names if n.startswith("_")]
    assert offenders == [], offenders


def _engine_branches(path: Path) -> list[str]:
    """Comparisons of a value with an engine's name ('podman', 'docker')."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        constants = {
            c.value
            for o in operands
            for c in ([o] if isinstance(o, ast.Constant) else getattr(o, "elts", []))
            if isinstance(c, ast.Constant)
        }
        if constants & ENGINES:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_nothing_outside_the_sandbox_package_branches_on_an_engine_name():
    # Which engine a backend is, and what it can give, is asked of tools/sandbox
    # (harbor_backends.our_engine, netns.gives_internet), so a new engine is one place to change.
    offenders = [
        line
        for folder in ("tools", "graphs", "training", "mcp_servers", "cli")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "sandbox" not in path.relative_to(ROOT).parts
        for line in _engine_branches(path)
    ]
    assert offenders == [], offenders
    # ... and the check sees such a branch where one is.
    assert _engine_branches(ROOT / "tools" / "sandbox" / "netns.py")
