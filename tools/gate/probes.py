"""Harbor agents the `anti_cheat` stage runs in real trials (no model needed).

- `LeakProbeAgent`: the oracle, plus a look around. It lists the agent's image before and after
  running solution/solve.sh exactly as Harbor's oracle does; files the solution writes are the
  expected outputs. A file of the image that was there all along and is byte-identical to an
  expected output, or to a file of tests/ or solution/, means the answer is readable by the agent.
- `TamperAgent`: does no work, only tampers: forges the reward files, or replaces the image's
  scripts that the tests execute with always-pass stubs, or plants always-pass interpreters on
  PATH. The verifier that runs after it must still fail the attempt.
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path, PurePosixPath
from typing import Any, Literal, override

from harbor.agents.base import BaseAgent
from harbor.agents.oracle import OracleAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from harbor.models.trial.paths import TrialPaths

from autoenvscaling.tools.task_format import load_task

# Never part of the image the agent starts from: kernel views, Harbor's folders, scratch space.
_PRUNE = ("/proc", "/sys", "/dev", "/run", "/tmp", "/var/tmp", "/logs", "/tests", "/solution")
# Files a solution may write that are never answers: caches, package bookkeeping, bytecode.
_NOT_OUTPUTS = ("/root/.cache/", "/var/cache/", "/var/log/", "/var/lib/apt/", "/var/lib/dpkg/")


def _find_command(out: str) -> str:
    prune = " -o ".join(f"-path {p}" for p in _PRUNE)
    return (
        f"find / -xdev \\( {prune} \\) -prune -o -type f -printf '%s\\t%T@\\t%p\\0' "
        f"> {out} 2>/dev/null; test -s {out}"
    )


def _parse_listing(data: bytes) -> dict[str, tuple[int, str]]:
    out: dict[str, tuple[int, str]] = {}
    for record in data.split(b"\0"):
        size, _, rest = record.partition(b"\t")
        mtime, _, path = rest.partition(b"\t")
        if path:
            out[path.decode("utf-8", "surrogateescape")] = (int(size), mtime.decode())
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def hidden_files(task_dir: Path, min_bytes: int) -> dict[str, str]:
    """sha256 -> 'tests/x' for files of tests/ and solution/ that must not be in the image.

    tests/ files byte-identical to a file of environment/ are shared inputs (a data generator
    both sides run), not answers, and are left out.
    """
    env = task_dir / "environment"
    shipped = {_sha256(p) for p in env.rglob("*") if p.is_file()} if env.is_dir() else set()
    out: dict[str, str] = {}
    for folder in ("solution", "tests"):
        root = task_dir / folder
        if not root.is_dir():
            continue
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            if path.stat().st_size < min_bytes:
                continue
            digest = _sha256(path)
            if folder == "tests" and digest in shipped:
                continue
            out.setdefault(digest, path.relative_to(task_dir).as_posix())
    return out


def named_in_instruction(path: str, instruction: str, workdir: str, output: str = "") -> bool:
    """The instruction points the agent at `path` (or its folder): an input, not a leak.

    A bare file name counts only when it differs from the name of the `output` the file
    matches: a hidden copy of /app/out.json at /opt/x/out.json is a leak even though the
    instruction says "out.json".
    """
    pure = PurePosixPath(path)
    forms = {path}
    if pure.name != PurePosixPath(output).name:
        forms.add(pure.name)
    if workdir not in ("", "/") and path.startswith(workdir.rstrip("/") + "/"):
        forms.add(path[len(workdir.rstrip("/")) + 1 :])
    # Folders named in the instruction (e.g. "the backups in /var/backups"), but not the
    # workdir or a top-level folder, which almost every instruction names.
    for parent in pure.parents:
        if len(parent.parts) > 2 and str(parent) != workdir.rstrip("/"):
            forms.add(str(parent))
    return any(form and form in instruction for form in forms)


class LeakProbeAgent(OracleAgent):
    """Harbor's oracle, wrapped in a before/after listing of the agent's image (see module doc)."""

    def __init__(
        self,
        logs_dir: Path,
        *args: Any,
        task_dir: str,
        min_bytes: int = 16,
        max_bytes: int = 50_000_000,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            logs_dir, Path(task_dir), TrialPaths(Path(logs_dir).parent), *args, **kwargs
        )
        self.task_path = Path(task_dir)
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes

    @staticmethod
    @override
    def name() -> str:
        return "autoenvscaling-leak-probe"

    async def _listing(self, environment: BaseEnvironment, tag: str) -> dict[str, tuple[int, str]]:
        remote = f"/tmp/.aes-listing-{tag}"
        result = await environment.exec(_find_command(remote), user="root")
        if result.return_code != 0:
            raise RuntimeError(f"cannot list the image (GNU find missing?): {result.stderr}")
        local = self.logs_dir / f"listing-{tag}.bin"
        await environment.download_file(remote, local)
        await environment.exec(f"rm -f {remote}", user="root")
        return _parse_listing(local.read_bytes())

    async def _hashes(self, environment: BaseEnvironment, paths: list[str]) -> dict[str, str]:
        """path -> sha256, computed inside the sandbox (the files never leave it)."""
        if not paths:
            return {}
        local = self.logs_dir / "hash-list.bin"
        local.write_bytes(b"\0".join(p.encode("utf-8", "surrogateescape") for p in paths))
        await environment.upload_file(local, "/tmp/.aes-hash-list")
        await environment.exec(
            "xargs -0 -r -a /tmp/.aes-hash-list sha256sum -z > /tmp/.aes-hashes 2>/dev/null; true",
            user="root",
        )
        out = self.logs_dir / "hashes.bin"
        await environment.download_file("/tmp/.aes-hashes", out)
        await environment.exec("rm -f /tmp/.aes-hash-list /tmp/.aes-hashes", user="root")
        hashes: dict[str, str] = {}
        for record in out.read_bytes().split(b"\0"):
            digest, _, path = record.partition(b"  ")
            if path:
                hashes[path.decode("utf-8", "surrogateescape")] = digest.decode()
        return hashes

    @override
    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        workdir = (await environment.exec("pwd")).stdout.strip() or "/"
        before = await self._listing(environment, "before")
        await super().run(instruction, environment, context)  # the oracle, unchanged
        after = await self._listing(environment, "after")

        def is_output(path: str, size: int) -> bool:
            return (
                after.get(path) != before.get(path)
                and self.min_bytes <= size <= self.max_bytes
                and "/__pycache__/" not in path
                and not path.endswith(".pyc")
                and not path.startswith(_NOT_OUTPUTS)
            )

        outputs = {p: s for p, (s, _) in after.items() if is_output(p, s)}
        hidden = hidden_files(self.task_path, self.min_bytes)
        hidden_sizes = {(self.task_path / rel).stat().st_size for rel in hidden.values()}
        sizes = set(outputs.values()) | hidden_sizes
        # Only files present before the solution ran, untouched by it, of a size worth hashing.
        suspects = [
            p
            for p, (s, m) in before.items()
            if s in sizes and after.get(p) == (s, m) and p not in outputs
        ]
        hashes = await self._hashes(environment, suspects + sorted(outputs))
        by_output = {hashes[p]: p for p in outputs if p in hashes}
        task_instruction = load_task(self.task_path).instruction
        leaks: list[dict[str, str]] = []
        for path in suspects:
            digest = hashes.get(path)
            if digest in hidden:
                leaks.append({"path": path, "kind": "task_file", "same_as": hidden[digest]})
            elif digest in by_output and not named_in_instruction(
                path, task_instruction, workdir, by_output[digest]
            ):
                leaks.append(
                    {"path": path, "kind": "expected_output", "same_as": by_output[digest]}
                )
        context.metadata = {
            **(context.metadata or {}),
            "leaks": leaks,
            "outputs": sorted(outputs)[:50],
            "files_scanned": len(before),
            "files_hashed": len(hashes),
            "workdir": workdir,
        }


TamperMode = Literal["forge", "stub", "interpreters"]

_FORGE = """mkdir -p /logs/verifier
echo 1 > /logs/verifier/reward.txt
echo '{"reward": 1.0}' > /logs/verifier/reward.json
chmod 444 /logs/verifier/reward.txt /logs/verifier/reward.json
echo /logs/verifier/reward.txt; echo /logs/verifier/reward.json"""

_STUB_ONE = """p={path}
if [ -f "$p" ]; then
  case "$p" in
    *.py) printf 'import sys\\nsys.exit(0)\\n' > "$p" ;;
    *) printf '#!/bin/sh\\nexit 0\\n' > "$p"; chmod +x "$p" ;;
  esac && echo "$p"
fi"""

_INTERPRETERS = """for name in python3 python pytest; do
  printf '#!/bin/sh\\nexit 0\\n' > /usr/local/bin/$name && chmod 755 /usr/local/bin/$name \\
    && echo /usr/local/bin/$name
done"""


class TamperAgent(BaseAgent):
    """Does no work; only tampers with what the verifier will read or run (see module doc)."""

    def __init__(
        self,
        *args: Any,
        mode: TamperMode = "forge",
        stub_paths: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.mode = mode
        self.stub_paths = list(stub_paths or [])

    @staticmethod
    @override
    def name() -> str:
        return "autoenvscaling-tamper"

    @override
    def version(self) -> str:
        return "1"

    @override
    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    def script(self) -> str:
        if self.mode == "forge":
            return _FORGE
        if self.mode == "interpreters":
            return _INTERPRETERS
        return "\n".join(_STUB_ONE.format(path=shlex.quote(p)) for p in self.stub_paths) or "true"

    @override
    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        result = await environment.exec(self.script(), user="root")
        context.metadata = {
            **(context.metadata or {}),
            "mode": self.mode,
            "tampered": [line for line in (result.stdout or "").splitlines() if line.strip()],
            "exit_code": result.return_code,
        }
