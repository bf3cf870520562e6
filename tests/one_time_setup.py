"""One-time set-up happens before the first test starts, never inside a test's time limit.

Hooks (imported by tests/conftest.py):
- `pytest_collection_finish`: when collected tests need the embedded model, it is fetched here,
  once, outside every test's timer (a fresh machine's first-use set-up took 222 s; a 600 s test
  limit that includes it fails for a reason that has nothing to do with the test). The base
  image is `make bases`' job: the engine fixtures fail when it is missing and never build it.
- `pytest_runtest_protocol` / `pytest_runtest_makereport`: each test runs with
  `AUTOENVSCALING_ONE_TIME_LOG` naming a file of its own (tools/one_time.py); every one-time build
  (the base rootfs, the embedded model and converters, the trainer's base weights, the cold start)
  appends a line there, so a build the test's own processes ran fails that test, naming the build
  that belongs in `make setup` or here. A build by another process on the machine (a `make run`
  building its cold start while the suite runs) never reaches that file and blames no test.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from autoenvscaling.tools.one_time import ONE_TIME_LOG_ENV

_LOG = pytest.StashKey[Path]()
_LOG_DIR = tempfile.mkdtemp(prefix="aes-one-time-")
atexit.register(shutil.rmtree, _LOG_DIR, True)


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
    # The embedded server's tests, and the Studio tests whose served run starts it itself (its
    # cold start trains the HF weights).
    embedded = {
        m
        for m in modules
        if m.rsplit(".", 1)[-1].startswith("test_embedded_") or m.endswith("test_studio_server")
    }
    if embedded:
        try:
            from autoenvscaling.training.serving import embedded_setup as setup
        except ImportError:
            return
        if not setup.llama_cpp_available():
            return

        def assets() -> None:
            found = setup.ensure_embedded_assets(with_converter=True)
            if any(m.endswith(("test_embedded_round", "test_studio_server")) for m in embedded):
                setup.ensure_hf_base_model(found)

        build("the embedded model", assets)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    log = Path(_LOG_DIR) / f"{os.getpid()}-{id(item)}.log"
    log.unlink(missing_ok=True)
    item.stash[_LOG] = log
    before = os.environ.get(ONE_TIME_LOG_ENV)
    os.environ[ONE_TIME_LOG_ENV] = str(log)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ONE_TIME_LOG_ENV, None)
        else:
            os.environ[ONE_TIME_LOG_ENV] = before
        log.unlink(missing_ok=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if call.when != "teardown" or _LOG not in item.stash:
        return
    try:
        built = item.stash[_LOG].read_text(encoding="utf-8").splitlines()
    except OSError:
        return
    if built:
        report.outcome = "failed"
        report.longrepr = (
            f"one-time set-up ran inside this test's time ({'; '.join(built)}): build it in "
            "`make setup` or in tests/one_time_setup.py's pytest_collection_finish, so no "
            "test's time limit includes it"
        )
