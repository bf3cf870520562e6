"""Harbor's log records at the embedding app's levels, its trial logs whole.

Harbor sets its main logger (`harbor.utils.logger`, parent of every trial's logger) to DEBUG so
each trial's `trial.log` gets everything. The same setting lets every DEBUG and INFO record
through to the app's root handlers, whatever level the app chose: an app embedding the flywheel
printed Harbor's debug lines it never asked for. `route_harbor_records()` stops that logger from
propagating and forwards to the `harbor` logger only the records at or above that logger's
effective level (the root's, WARNING, unless the app sets `harbor`'s or the root's lower). The
trial's own file handler sits below and still gets every record.
"""

from __future__ import annotations

import logging

#: Harbor's main logger (harbor/utils/logger.py); trial loggers are its children.
HARBOR_MAIN = "harbor.utils.logger"


class _AtAppLevel(logging.Handler):
    """Hands a record to the `harbor` logger when the app's levels would show it."""

    def emit(self, record: logging.LogRecord) -> None:
        target = logging.getLogger("harbor")
        if record.levelno >= target.getEffectiveLevel():
            target.handle(record)


def route_harbor_records() -> None:
    """Idempotent; called where this package first runs a Harbor trial."""
    main = logging.getLogger(HARBOR_MAIN)
    if any(isinstance(h, _AtAppLevel) for h in main.handlers):
        return
    main.addHandler(_AtAppLevel())
    main.propagate = False
