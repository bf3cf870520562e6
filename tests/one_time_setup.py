"""One-time set-up happens before the first test starts, never inside a test's time limit.

Hooks (imported by tests/conftest.py):
- `pytest_collection_finish`: when collected tests need the embedded model, it is fetched here,
  once, outside every test's timer (a fresh machine's first-use set-up took 222 s; a 600 s test
  limit that includes it fails for a reason that has nothing to do with the test). The base
  image is `make bases`' job: the engine fixtures fail when it is missing and never build it.
- `pytest_runtest_protocol` / `pytest_runtest_makereport`: the markers one-time builds leave (the
  base rootfs's `.ready` file, the embedded model cache, any path in
  AUTOENVSCALING_ONE_TIME_MARKERS) are compared before and after each test, fixtures included;
  one that appears fails that test, naming the build that belongs in `make setup` or here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

MARKERS_ENV = "AUTOENVSCALING_ONE_TIME_MARKERS"
_BEFORE = pytest.StashKey[frozenset[str]]()


def _markers() -> list[Path]:
    """Paths that exist only once a one-time build has run (folders: their entries count)."""
    paths = [Path(p) for p in os.environ.get(MARKERS_ENV, "").split(os.pathsep) if p]
    try:
        from autoenvscaling.tools.sandbox.bases import base_rootfs_path

        base = base_rootfs_path()
        paths.append(base.parent / f"{base.name}.ready")
    except Exception:  # noqa: BLE001 - a backend that is not installed builds nothing
        pass
    try:
        from autoenvscaling.training.serving.embedded_setup import embedded_cache_dir

        paths.append(embedded_cache_dir())
    except Exception:  # noqa: BLE001 - the embedded extra is optional
        pass
    return paths


def _snapshot() -> frozenset[str]:
    seen: set[str] = set()
    for path in _markers():
        if path.is_dir():
            try:
                seen.update(str(child) for child in path.iterdir())
            except OSError:
                continue
        elif path.exists():
            seen.add(str(path))
    return frozenset(seen)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build what the collected tests need before any of them starts its timer."""
    if session.config.option.collectonly:
        return
    items = session.items
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")

    def build(what: str, action) -> None:
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - the tests that need it say so themselves
            if reporter is not None:
                reporter.write_line(f"one-time set-up of {what} failed: {exc}", yellow=True)

    modules = {getattr(i.module, "__name__", "") for i in items if hasattr(i, "module")}
    embedded = {m for m in modules if m.rsplit(".", 1)[-1].startswith("test_embedded_")}
    if embedded:
        try:
            from autoenvscaling.training import embedded_setup as setup
        except ImportError:
            return
        if not setup.llama_cpp_available():
            return

        def assets() -> None:
            found = setup.ensure_embedded_assets(with_converter=True)
            if any(m.endswith("test_embedded_round") for m in embedded):
                setup.ensure_hf_base_model(found)

        build("the embedded model", assets)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    item.stash[_BEFORE] = _snapshot()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if call.when != "teardown" or _BEFORE not in item.stash:
        return
    built = sorted(_snapshot() - item.stash[_BEFORE])
    if built:
        report.outcome = "failed"
        report.longrepr = (
            f"one-time set-up ran inside this test's time ({', '.join(built)}): build it in "
            "`make setup` or in tests/one_time_setup.py's pytest_collection_finish, so no "
            "test's time limit includes it"
        )
