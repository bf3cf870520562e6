"""One-time builds say that they ran, to whoever asked in the environment.

The base root filesystem, the embedded model and its converters, the trainer's copy of the base
weights and the cold start are built once per machine, into a cache every process shares. A test
harness that must tell "this test built it" from "another process on the machine built it"
(a `make run` building its cold start while the suite runs) cannot tell by looking at the cache.
So each build appends a line to the file named by `AUTOENVSCALING_ONE_TIME_LOG`, which only the
processes of the asking test inherit; nothing is written when the variable is unset.
"""

from __future__ import annotations

import os

ONE_TIME_LOG_ENV = "AUTOENVSCALING_ONE_TIME_LOG"


def record_one_time_build(what: str) -> None:
    """Append `what` (one line) to the log the environment names, if any."""
    log = os.environ.get(ONE_TIME_LOG_ENV)
    if not log:
        return
    try:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(what.replace("\n", " ") + "\n")
    except OSError:
        pass  # a harness's log that went away must never fail the build it watches
