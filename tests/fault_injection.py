"""One fault injected into otherwise real runs: the container engine refuses a sandbox start.

`RefusedStarts(n)` makes the first `n` container starts of this process raise the engine's own
`EngineUnavailableError`, as a podman service that stopped answering does; every other start,
build, trial, verifier and training step is real. The same fault is injected at calibration, in
refresh and inside a GRPO episode, so the tests can insist all three classify it the same way
(tools/trials/faults.py).

The GRPO worker is a child process: `python -m tests.fault_injection JOB` is the real worker
(`training/grpo/worker.py`) with the fault installed first, as many starts as FAULT_ENV says.

This module holds no tests.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from autoenvscaling.tools.sandbox.container import ContainerSandbox
from autoenvscaling.tools.sandbox.engine import EngineUnavailableError

FAULT_ENV = "AES_TEST_REFUSED_STARTS"
MESSAGE = "injected fault: the podman service stopped answering (connection refused)"


class RefusedStarts:
    """The first `count` calls of `ContainerSandbox.start` raise EngineUnavailableError."""

    def __init__(self, count: int = 1) -> None:
        self.count = count
        self.refused = 0
        self.started = 0

    def install(self, setattr_: Callable[[Any, str, Any], None] = setattr) -> RefusedStarts:
        """Patch the engine's start (pass pytest's `monkeypatch.setattr` to undo it after)."""
        original = ContainerSandbox.start  # bound to the class
        fault = self

        async def start(cls: type[ContainerSandbox], *args: Any, **kwargs: Any) -> Any:
            if fault.refused < fault.count:
                fault.refused += 1
                raise EngineUnavailableError(MESSAGE)
            fault.started += 1
            return await original(*args, **kwargs)

        setattr_(ContainerSandbox, "start", classmethod(start))
        return self


def main(argv: list[str] | None = None) -> int:
    """The GRPO worker with the first FAULT_ENV sandbox starts refused."""
    RefusedStarts(int(os.environ.get(FAULT_ENV, "1"))).install()
    from autoenvscaling.training.grpo.worker import main as worker_main

    return worker_main(argv)


if __name__ == "__main__":
    sys.exit(main())
