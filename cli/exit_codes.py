"""The exit status of every `autoenvscaling` command: one meaning per code (README, "Exit status").

- 0 `OK`: the command did all its work, and (validate) every task was admitted.
- 1 `FAILED`: the work ran and did not succeed: an attempt errored through its task's fault (the
  environment does not build, the verifier gives no reward), a task was rejected (validate), or
  the run stopped on an error (run) other than a lost policy server.
- 2 `USAGE`: the command line is wrong; click's own code for a bad option or argument, so a
  command never uses 2 for anything else.
- 3 `INFRASTRUCTURE`: an attempt errored outside its task's control (the engine, a sandbox, the
  model endpoint, our own code): the result says nothing about the task; running it again may help.
  A run that stopped because its policy server crashed again after its one restart is 3 too
  (the message names the signal and the server log's last lines; `--resume` continues it).

When both 1 and 3 apply, 3 wins: some results are missing, and the ones present are not the whole
answer. The reasons themselves are in each command's output (`--json`: `error`, `fault`).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum

from autoenvscaling.tools.trials.faults import Fault


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    INFRASTRUCTURE = 3


def exit_code_for(faults: Iterable[Fault | None]) -> ExitCode:
    """The status for attempts that errored, given whose fault each was (None: unknown, counted as
    a failure of the work). No attempts errored: OK."""
    seen = list(faults)
    if "infrastructure" in seen:
        return ExitCode.INFRASTRUCTURE
    return ExitCode.FAILED if seen else ExitCode.OK
