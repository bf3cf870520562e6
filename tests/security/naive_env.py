"""The controls' environment: our container environment minus the end-of-agent kill.

It is what a shared verifier was before `end_agent_processes` (the verifier meets whatever the
agent left running). A forgery attack that scores 1.0 here is live, so the test that sees it
score 0 on the real environment can fail.
"""

from __future__ import annotations

from typing import override

from autoenvscaling.tools.sandbox.harbor_env import HardenedPodmanEnvironment

IMPORT_PATH = "tests.security.naive_env:NaiveEnvironment"


class NaiveEnvironment(HardenedPodmanEnvironment):
    @override
    async def end_agent_processes(self) -> int:
        return 0
