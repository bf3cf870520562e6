"""A fake remote sandbox for benchmarking the coordinator alone (benchmarks/bench_concurrency.py).

`FakeRemoteSandbox` implements the project's `Sandbox` contract (tools/sandbox/base.py): every call
waits like a round trip to a remote provider (seeded jitter), then answers from an in-memory file
tree. Nothing runs on the host: commands are interpreted (a small, fixed vocabulary — what Harbor's
trial and the benchmark's scripted solver send), never executed. `FakeRemoteEnvironment` is our
Harbor environment adapter (`SandboxEnvironment`) over it, so Harbor runs real trials on it, and
`install()` routes the terminal MCP server's `attach` to the live fake: those two seams are the only
things replaced. Everything between them (flywheel attempter, solver graph, Harbor trial, agent
loop, MCP session, rollout store) is the project's own code. The solver's terminal therefore takes
our engines' attached-shell path (one exec per command here), not `ExecShell`, the exec path of
Harbor's cloud types.

What the fake leaves out: real process cost and output sizes, `ExecShell`'s job scripts, the
network's bandwidth and failures, a provider's rate limits, commands outliving their timeout
(`read_output`, `interrupt`), building images, and the verifier's own run (its reward is computed
from the file tree).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import shlex
import time
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, override

from pydantic import BaseModel, Field

from autoenvscaling.mcp_servers import terminal as terminal_server
from autoenvscaling.tools.sandbox.base import ExecOutput, Sandbox, SandboxRef
from autoenvscaling.tools.sandbox.harbor_env import SandboxEnvironment
from autoenvscaling.tools.sandbox.shell import ShellResult

IMPORT_PATH = "fake_remote:FakeRemoteEnvironment"
BACKEND = "fake-remote"


class FakeLatency(BaseModel):
    """How slow the fake provider is. Each call waits `base * U(1 - jitter, 1 + jitter)`."""

    exec_ms: float = Field(default=120.0, description="One exec's round trip")
    start_ms: float = Field(default=400.0, description="Starting a sandbox")
    transfer_ms: float = Field(default=150.0, description="One upload or download")
    jitter: float = Field(default=0.5, ge=0.0, le=1.0)
    seed: int = 0


class _Config:
    latency = FakeLatency()
    rng = random.Random(0)
    ids = itertools.count()
    live: ClassVar[dict[str, FakeRemoteSandbox]] = {}
    calls: ClassVar[Counter[str]] = Counter()
    unknown: ClassVar[list[str]] = []


def configure(latency: FakeLatency) -> None:
    _Config.latency = latency
    _Config.rng = random.Random(latency.seed)
    _Config.calls.clear()
    _Config.unknown.clear()


def stats() -> dict[str, Any]:
    """Calls the fake served, by kind; commands it did not understand; sandboxes still open."""
    return {
        "calls": dict(_Config.calls),
        "unknown_commands": list(_Config.unknown[:20]),
        "unknown_count": len(_Config.unknown),
        "open_sandboxes": len(_Config.live),
    }


async def _wait(base_ms: float) -> None:
    j = _Config.latency.jitter
    await asyncio.sleep(base_ms * _Config.rng.uniform(1 - j, 1 + j) / 1000)


class FakeShell:
    """The persistent shell's face (`run`/`read`/`interrupt`/`close`/`busy`): each `run` is one
    exec, as on a provider that has no live process to attach to (tools/sandbox/exec_shell.py)."""

    def __init__(self, sandbox: FakeRemoteSandbox) -> None:
        self.sandbox = sandbox
        self._last: int | None = None

    @property
    def busy(self) -> bool:
        return False

    async def run(self, command: str, timeout_sec: float | None = 120) -> ShellResult:
        out = await self.sandbox.exec(command, timeout_sec=timeout_sec)
        self._last = out.exit_code
        text = out.stdout + out.stderr
        return ShellResult(
            exit_code=out.exit_code,
            output=text,
            output_bytes=len(text.encode()),
            duration_sec=out.duration_sec,
        )

    async def read(self, timeout_sec: float = 10) -> ShellResult:
        return ShellResult.nothing_running(self._last)

    async def interrupt(self, grace_sec: float = 3) -> ShellResult:
        return ShellResult.nothing_running(self._last)

    async def close(self) -> None:
        return None


class FakeRemoteSandbox(Sandbox):
    """One fake remote sandbox: an in-memory file tree behind sleeps."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.ref = SandboxRef(
            backend="podman",
            id=f"fake-{next(_Config.ids)}",
            workdir="/app",
            handle={"fake_remote": True},
        )
        _Config.live[self.ref.id] = self

    @classmethod
    async def start(cls) -> FakeRemoteSandbox:
        _Config.calls["start"] += 1
        await _wait(_Config.latency.start_ms)
        return cls()

    @override
    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: float | None = None,
        user: str | int | None = None,
    ) -> ExecOutput:
        _Config.calls["exec"] += 1
        started = time.monotonic()
        await _wait(_Config.latency.exec_ms)
        code, out = self._interpret(command)
        return ExecOutput(
            exit_code=code, stdout=out, duration_sec=round(time.monotonic() - started, 4)
        )

    @override
    async def upload(self, source: Path, target: str) -> None:
        _Config.calls["upload"] += 1
        await _wait(_Config.latency.transfer_ms)
        found = await asyncio.to_thread(_read_tree, source)
        if found is None:  # a single file
            self.files[target] = await asyncio.to_thread(source.read_bytes)
            return
        for rel, data in found.items():
            self.files[str(PurePosixPath(target) / rel)] = data

    @override
    async def download(self, source: str, target: Path) -> list[str] | None:
        _Config.calls["download"] += 1
        await _wait(_Config.latency.transfer_ms)
        if source in self.files:
            await asyncio.to_thread(_write, target, self.files[source])
            return None
        prefix = source.rstrip("/") + "/"
        for path, data in list(self.files.items()):
            if path.startswith(prefix):
                await asyncio.to_thread(_write, target / path[len(prefix) :], data)
        return None

    @override
    async def open_shell(self, *, cwd: str | None = None, env: dict[str, str] | None = None) -> Any:
        return FakeShell(self)

    @override
    async def close(self) -> None:
        if _Config.live.pop(self.ref.id, None) is not None:
            _Config.calls["close"] += 1
            await _wait(_Config.latency.exec_ms)

    # -- the interpreted commands ----------------------------------------------------------------
    def _interpret(self, command: str) -> tuple[int, str]:
        if "/tests/test.sh" in command and "chmod" not in command:
            return self._verify()
        try:
            words = shlex.split(command)
        except ValueError:
            words = []
        if not words:
            return self._unknown(command)
        if "&&" in words or ";" in command:  # Harbor's set-up chains: each part in turn
            parts = [
                shlex.join(g) for k, g in itertools.groupby(words, lambda w: w == "&&") if not k
            ]
            if len(parts) > 1:
                results = [self._interpret(p) for p in parts]
                return results[-1][0], "".join(out for _, out in results)
        head, args = words[0], words[1:]
        if head in {"mkdir", "chmod", "chown", "rm", "true", "cd"}:
            for path in args if head == "rm" else ():
                self.files.pop(path, None)
            return 0, ""
        if head == "echo":
            return self._echo(args)
        if head == "cat":
            missing = [p for p in args if p not in self.files]
            if missing:
                return 1, f"cat: {missing[0]}: No such file or directory\n"
            return 0, "".join(self.files[p].decode(errors="replace") for p in args)
        if head == "ls":
            folder = next((a for a in args if not a.startswith("-")), "/app").rstrip("/") + "/"
            names = sorted(
                {p[len(folder) :].split("/")[0] for p in self.files if p.startswith(folder)}
            )
            return 0, "".join(f"{n}\n" for n in names)
        if head == "test" and len(args) == 2 and args[0] in {"-d", "-e", "-f"}:
            path = args[1].rstrip("/")
            is_file = path in self.files
            is_dir = any(p.startswith(path + "/") for p in self.files)
            found = {"-d": is_dir, "-f": is_file, "-e": is_file or is_dir}[args[0]]
            return (0 if found else 1), ""
        if head == "pwd":
            return 0, "/app\n"
        if head == "seq" and args and all(a.isdigit() for a in args):
            low, high = (1, int(args[0])) if len(args) == 1 else (int(args[0]), int(args[1]))
            return 0, "".join(f"{i}\n" for i in range(low, high + 1))
        return self._unknown(command)

    def _echo(self, args: list[str]) -> tuple[int, str]:
        for op in (">>", ">"):
            if op in args:
                i = args.index(op)
                text = (" ".join(args[:i]) + "\n").encode()
                path = args[i + 1] if i + 1 < len(args) else ""
                old = self.files.get(path, b"") if op == ">>" else b""
                self.files[path] = old + text
                return 0, ""
        return 0, " ".join(args) + "\n"

    def _verify(self) -> tuple[int, str]:
        """The task's test.sh, emulated: /app/answer.txt must hold /tests/expected.txt's word."""
        want = self.files.get("/tests/expected.txt", b"").strip()
        got = self.files.get("/app/answer.txt", b"").strip()
        reward = "1" if want and got == want else "0"
        self.files["/logs/verifier/reward.txt"] = f"{reward}\n".encode()
        self.files["/logs/verifier/test-stdout.txt"] = f"expected {want!r}, got {got!r}\n".encode()
        return 0, ""

    def _unknown(self, command: str) -> tuple[int, str]:
        _Config.unknown.append(command[:200])
        return 127, f"bash: {command.split()[0] if command.split() else ''}: command not found\n"


def _read_tree(source: Path) -> dict[str, bytes] | None:
    if not source.is_dir():
        return None
    return {
        p.relative_to(source).as_posix(): p.read_bytes() for p in source.rglob("*") if p.is_file()
    }


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


class _Attached(Sandbox):
    """What `attach` returns for a fake ref: the live sandbox's shell; closing it leaves the
    sandbox up (as an attached container does: the trial owns it)."""

    def __init__(self, target: FakeRemoteSandbox) -> None:
        self.target, self.ref = target, target.ref

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: float | None = None,
        user: str | int | None = None,
    ) -> ExecOutput:
        return await self.target.exec(command, timeout_sec=timeout_sec)

    async def upload(self, source: Path, target: str) -> None:
        await self.target.upload(source, target)

    async def download(self, source: str, target: Path) -> list[str] | None:
        return await self.target.download(source, target)

    async def open_shell(self, *, cwd: str | None = None, env: dict[str, str] | None = None) -> Any:
        return FakeShell(self.target)

    async def close(self) -> None:
        return None


class FakeRemoteEnvironment(SandboxEnvironment):
    """Our Harbor environment adapter over the fake: Harbor's trial drives it as any other."""

    @staticmethod
    @override
    def type() -> str:
        return BACKEND

    @override
    async def _start_sandbox(self, force_build: bool) -> Sandbox:
        return await FakeRemoteSandbox.start()

    @override
    async def end_agent_processes(self) -> int:
        # A remote provider would need one exec to end the agent's processes; nothing runs here.
        await _wait(_Config.latency.exec_ms)
        return 0


def install() -> None:
    """Route `fake-remote` trials to the fake, and the terminal server's attach to live fakes."""
    from autoenvscaling.tools.trials.trial import ENVIRONMENTS

    ENVIRONMENTS[BACKEND] = {"import_path": IMPORT_PATH}
    real = terminal_server.attach
    if getattr(real, "_fake_remote", False):
        return

    async def attach(ref: SandboxRef) -> Sandbox:
        if ref.handle.get("fake_remote"):
            return _Attached(_Config.live[ref.id])
        return await real(ref)

    attach._fake_remote = True  # type: ignore[attr-defined]
    terminal_server.attach = attach
