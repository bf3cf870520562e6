"""Progress is shown on a terminal (counts, status) and silent otherwise; Harbor's web-tools
noise never reaches the console while its real errors do."""

from __future__ import annotations

import io
import logging

from rich.console import Console

from autoenvscaling.cli.main import HarborLogFilter
from autoenvscaling.cli.progress import TaskProgress


def _run(console: Console, *, quiet: bool = False) -> TaskProgress:
    with TaskProgress("validate", total=3, quiet=quiet, console=console) as bar:
        for name in ("alpha", "beta", "gamma"):
            bar.status(f"{name}: oracle")
            bar.advance()
    return bar


def test_terminal_shows_counts_and_status():
    out = io.StringIO()
    bar = _run(Console(file=out, force_terminal=True, width=120))
    text = out.getvalue()
    assert bar.enabled and bar.done == 3
    assert "validate" in text and "3/3" in text and "gamma: oracle" in text


def test_quiet_when_not_a_terminal_or_under_json():
    for console, quiet in (
        (Console(file=io.StringIO(), force_terminal=False), False),
        (Console(file=io.StringIO(), force_terminal=True), True),
    ):
        bar = _run(console, quiet=quiet)
        assert not bar.enabled and bar.done == 3
        assert console.file.getvalue() == ""  # type: ignore[attr-defined]


def _record(name: str, level: int, msg: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, ("oracle",), None)


def test_harbor_web_tools_noise_is_dropped_and_real_errors_kept():
    noise = "Agent '%s' exposes no native web search or fetch tools for Harbor to disable"
    for verbose in (False, True):
        keep = HarborLogFilter(verbose).filter
        assert not keep(_record("harbor.utils.logger.trial.x.agents", logging.ERROR, noise))
        assert keep(_record("harbor.utils.logger.trial.x", logging.ERROR, "verifier crashed"))
        assert keep(_record("autoenvscaling.gate", logging.INFO, noise))
    assert not HarborLogFilter(False).filter(_record("harbor.trial", logging.INFO, "started"))
    assert HarborLogFilter(True).filter(_record("harbor.trial", logging.INFO, "started"))
