"""The package uses other libraries through their public doors only.

Where a library has no public door for what we need, the contact lives in one adapter module per
library (`ADAPTERS`), and that library's test fails loudly when the upstream shape changes
(`tests/test_adapters.py`). Everywhere else, parsing every module of the package (tests and
benchmarks are outside it), none of these appears:
- `from <library> import _name`;
- `obj._name` or `getattr(obj, "_name")` where no module of ours defines `_name` (so it is
  another library's private attribute: ours are assigned, declared or defined somewhere here);
- a name on `KNOWN_PRIVATE` (private parts of other libraries we once used), however reached;
- an assignment to an attribute of another library's module or class (a monkeypatch);
- a warnings filter for the whole process (outside `with warnings.catch_warnings():`): only an
  adapter may silence what its library warns about.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_architecture import FOLDERS

REPO = Path(__file__).resolve().parents[1]

#: library (top-level import name) -> the one module allowed to touch its private parts.
ADAPTERS = {
    "trl": "training/trl_adapter.py",
    "mcp": "mcp_servers/mcp_adapter.py",
    "llama_cpp": "training/serving/llama_cpp_adapter.py",
    "harbor": "tools/harbor_adapter.py",
    "docker": "tools/sandbox/docker_adapter.py",
    "langgraph": "graphs/agent/langgraph_adapter.py",
}

#: Private parts of other libraries that the package has used: caught by name wherever they
#: appear in code (not in docstrings or comments), even where a module of ours reuses the name.
KNOWN_PRIVATE = {
    "_use_triton",  # trl.trainer.utils
    "_get_tool_suffix_ids",  # trl's GRPOTrainer
    "_validate_tool_result",  # mcp's ClientSession
    "_tool_output_schemas",  # mcp's ClientSession
    "_mcp_server",  # mcp's FastMCP
    "_model_settings_dict",  # llama_cpp.server.model.LlamaProxy
    "_default_model_alias",
    "_current_model_alias",
    "_llama_proxy",  # llama_cpp.server.app
    "_ENVIRONMENT_REGISTRY",  # harbor.environments.factory
    "_disable_socket_timeout",  # docker's APIClient
    "_put_checkpoint_fut",  # langgraph's loop
}

#: Underscore names that are documented public API.
DOCUMENTED = {"_exit", "_getframe", "_replace", "_asdict", "_fields", "_make", "_field_defaults"}


def package_modules() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (REPO / folder).rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__") and name != "_"


def our_names(trees: dict[Path, ast.Module]) -> set[str]:
    """Every name the package itself assigns, declares or defines."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias) and node.asname:
                names.add(node.asname)
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
            ):
                names |= {
                    c.value
                    for c in ast.walk(node.value)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                }
    return names


def _library(module: str | None) -> str | None:
    """The top-level name of an imported module, None for ours."""
    if not module:
        return None  # a relative import: ours
    top = module.split(".")[0]
    return None if top in {"autoenvscaling", "__future__"} else top


def _imported(tree: ast.Module) -> dict[str, str]:
    """Local name -> library, for every name this module binds by importing another library."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if library := _library(alias.name):
                    bound[alias.asname or alias.name.split(".")[0]] = library
        elif isinstance(node, ast.ImportFrom) and (library := _library(node.module)):
            for alias in node.names:
                bound[alias.asname or alias.name] = library
    return bound


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _scoped_warning_calls(tree: ast.Module) -> set[int]:
    """ids of the calls made inside a `with warnings.catch_warnings():` block."""
    scoped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With | ast.AsyncWith) and any(
            "catch_warnings" in ast.unparse(item.context_expr) for item in node.items
        ):
            scoped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return scoped


def findings(path: Path, tree: ast.Module, ours: set[str]) -> Iterator[tuple[str, str]]:
    """(library, "file:line what") for each contact with another library's private parts, each
    monkeypatch of another library and each process-wide warnings filter in `tree`. The library
    is "?" where the object's library cannot be read off the code (`obj._name` on a parameter),
    "warnings" for a warnings filter."""
    rel = path.relative_to(REPO).as_posix()
    imported = _imported(tree)
    scoped = _scoped_warning_calls(tree)

    def where(node: ast.AST, what: str) -> str:
        return f"{rel}:{getattr(node, 'lineno', 0)} {what}"

    def foreign(name: str) -> bool:
        return (
            _private(name)
            and name not in DOCUMENTED
            and (name in KNOWN_PRIVATE or name not in ours)
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (library := _library(node.module)):
            for alias in node.names:
                if _private(alias.name):
                    yield library, where(node, f"from {node.module} import {alias.name}")
        elif isinstance(node, ast.Attribute):
            library = imported.get(_root(node) or "", "?")
            if foreign(node.attr):
                yield library, where(node, f"._{node.attr.lstrip('_')} (not ours)")
            if isinstance(node.ctx, ast.Store | ast.Del) and library != "?":
                yield library, where(node, f"assigns {ast.unparse(node)} (a monkeypatch)")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"filterwarnings", "simplefilter"}
            and id(node) not in scoped
        ):
            yield "warnings", where(node, f"a process-wide {ast.unparse(node.func)}")
        elif isinstance(node, ast.Name) and node.id in KNOWN_PRIVATE:
            yield imported.get(node.id, "?"), where(node, node.id)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "setattr", "hasattr", "delattr"}
            and len(node.args) >= 2
        ):
            target, name = node.args[0], node.args[1]
            library = imported.get(_root(target) or "", "?")
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                if foreign(name.value):
                    yield library, where(node, f'{node.func.id}(..., "{name.value}")')
            if node.func.id in {"setattr", "delattr"} and library != "?":
                yield library, where(node, f"{node.func.id} on {ast.unparse(target)}")


def all_findings() -> list[tuple[str, str]]:
    trees = {p: ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in package_modules()}
    ours = our_names(trees)
    return [f for path, tree in trees.items() for f in findings(path, tree, ours)]


def allowed(library: str, what: str) -> bool:
    """In the library's adapter; what cannot be pinned on one library, in any adapter."""
    path = what.split(":", 1)[0]
    if library in {"?", "warnings"}:
        return path in ADAPTERS.values()
    return path == ADAPTERS.get(library)


@pytest.mark.timeout(60)
def test_private_parts_of_other_libraries_only_in_their_adapter():
    misplaced = [what for library, what in all_findings() if not allowed(library, what)]
    assert not misplaced, (
        "private parts of other libraries used outside their adapter module: use the library's "
        "public door, or move the contact into the library's adapter (ADAPTERS) with a test "
        "that fails when the upstream shape changes:\n  " + "\n  ".join(misplaced)
    )


def test_every_adapter_exists():
    missing = [path for path in ADAPTERS.values() if not (REPO / path).is_file()]
    assert not missing, f"adapter modules named in ADAPTERS but gone: {missing}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import trl.trainer.utils as u\nu._use_triton = None\n", "_use_triton"),
        ("from harbor.environments.factory import _ENVIRONMENT_REGISTRY\n", "_ENVIRONMENT"),
        ("def f(server):\n    return server._mcp_server\n", "_mcp_server"),
        ("def f(api, s):\n    api._no_such_name_of_ours(s)\n", "not ours"),
        ('def f(sock):\n    return getattr(sock, "_sock_of_theirs", sock)\n', "_sock_of_theirs"),
        ("import llama_cpp.server.app as a\na.LlamaProxy = object\n", "monkeypatch"),
        ("from mcp.client.session import ClientSession\nClientSession.x = 1\n", "monkeypatch"),
        ('import warnings\nwarnings.filterwarnings("ignore")\n', "process-wide"),
    ],
)
def test_the_scan_catches(source: str, expected: str, tmp_path: Path):
    path = REPO / "tools" / "probe_module.py"  # a path inside the package (never written)
    tree = ast.parse(source)
    found = [what for _, what in findings(path, tree, {"_ours"})]
    assert any(expected in what for what in found), found


def test_the_scan_lets_scoped_warnings_filters_be():
    source = "import warnings\nwith warnings.catch_warnings():\n    warnings.simplefilter('x')\n"
    assert not list(findings(REPO / "tools" / "x.py", ast.parse(source), set()))


def test_an_adapter_holds_only_its_own_library():
    assert allowed("trl", "training/trl_adapter.py:1 x")
    assert not allowed("trl", "tools/harbor_adapter.py:1 x")
    assert allowed("?", "tools/harbor_adapter.py:1 x")
    assert not allowed("?", "tools/sandbox/streams.py:1 x")


def test_the_scan_lets_our_own_private_names_be():
    source = "class A:\n    def __init__(self):\n        self._ours = 1\n\ndef f(a):\n    return a._ours\n"
    tree = ast.parse(source)
    assert not list(findings(REPO / "tools" / "x.py", tree, our_names({REPO: tree})))
