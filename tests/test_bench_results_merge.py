"""`make bench` rewrites only its own block of benchmarks/RESULTS.md: hand-written sections (runs
no script repeats) survive, and a file without the markers gets the block on top."""

from __future__ import annotations

import importlib.util

from .conftest import REPO


def _run_all():
    spec = importlib.util.spec_from_file_location("run_all", REPO / "benchmarks" / "run_all.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_new_table_replaces_only_the_generated_block() -> None:
    run_all = _run_all()
    old = f"intro\n{run_all.BEGIN}\nold table\n{run_all.END}\n\n## by hand\nkept\n"
    new = run_all.merged(old, "new table\n")
    assert new == f"intro\n{run_all.BEGIN}\nnew table\n{run_all.END}\n## by hand\nkept\n"
    assert run_all.merged(new, "newer\n").count(run_all.BEGIN) == 1
    assert run_all.merged("", "t\n") == f"{run_all.BEGIN}\nt\n{run_all.END}\n"
    assert run_all.merged("## by hand\n", "t\n").endswith("## by hand\n")


def test_the_committed_results_have_one_generated_block() -> None:
    text = (REPO / "benchmarks" / "RESULTS.md").read_text()
    run_all = _run_all()
    assert text.count(run_all.BEGIN) == text.count(run_all.END) == 1
