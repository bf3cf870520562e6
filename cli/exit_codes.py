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

- 4 `CANNOT_RUN_HERE` (validate, import): a task was not judged because this machine lacks what
  it needs (a base image no registry serves, the internet, GPUs, compose); the verdict's
  `missing` says what and how to provide it. Not 1: the task may be right. Not 3: rerunning on
  the same machine gives the same answer; providing what is missing changes it.
- 130 `INTERRUPTED` (run): stopped by Ctrl-C (SIGINT), the shell's code for it. The steps that
  finished are checkpointed; `--resume` continues.

When both 1 and 3 apply, 3 wins: some results are missing, and the ones present are not the whole
answer. Likewise 4 wins over 1 (a task not judged is a missing result), and 3 over 4 (a rerun may
answer for the tasks the machinery failed). The reasons themselves are in each command's output
(`--json`: `error`, `fault`, `kind`, `missing`).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from typing import Literal

from ..tools.trials.faults import Fault


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    INFRASTRUCTURE = 3
    CANNOT_RUN_HERE = 4
    INTERRUPTED = 130


def exit_code_for(faults: Iterable[Fault | None]) -> ExitCode:
    """The status for attempts that errored, given whose fault each was (None: unknown, counted as
    a failure of the work). No attempts errored: OK."""
    seen = list(faults)
    if "infrastructure" in seen:
        return ExitCode.INFRASTRUCTURE
    return ExitCode.FAILED if seen else ExitCode.OK


def exit_code_for_kinds(
    kinds: Iterable[Literal["task_wrong", "cannot_run_here", "infrastructure"] | None],
) -> ExitCode:
    """The status for verdicts, given each one's kind of "no" (None: admitted): 3 over 4 over 1."""
    seen = set(kinds)
    for kind, code in (
        ("infrastructure", ExitCode.INFRASTRUCTURE),
        ("cannot_run_here", ExitCode.CANNOT_RUN_HERE),
        ("task_wrong", ExitCode.FAILED),
    ):
        if kind in seen:
            return code
    return ExitCode.OK
