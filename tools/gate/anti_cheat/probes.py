"""Harbor agents the `anti_cheat` stage runs in real trials (no model needed).

- `list_image`, the listing `audit.OracleAuditAgent` and the cheat agent compare before and after.
- `TamperAgent`: does no work, only tampers: forges the reward files; replaces the programs the
  tests execute that the agent can write with always-pass stubs; drops modules named like the
  ones the test runner imports into the working directories; writes the status files the
  instruction mentions; leaves a process running that tampers with /tests, the outputs and the
  reward while the verifier runs; or plants always-pass interpreters on PATH. The verifier that
  runs after it must still fail the attempt.
  Three modes are real programs in the agent's WORK, which the verifier gets whatever its mode:
  `program` (the programs the tests run become ones that write the reward, then keep rewriting
  it from the background), `git` (every repository in the work names such a program as its
  fsmonitor, clean/smudge filter and hooks), `customize` (`sitecustomize`/`usercustomize` that
  write the reward in the workdir, the tests' `cd` folders and the task's PYTHONPATH).
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path, PurePosixPath
from typing import Any, Literal, override

from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

from ...trials.script_agent import PlainAgent

# Never part of the image the agent starts from: kernel views, Harbor's folders, scratch space.
_PRUNE = ("/proc", "/sys", "/dev", "/run", "/tmp", "/var/tmp", "/logs", "/tests", "/solution")
# Files a solution may write that are never answers: caches, package bookkeeping, bytecode.
NOT_OUTPUTS = ("/root/.cache/", "/var/cache/", "/var/log/", "/var/lib/apt/", "/var/lib/dpkg/")


async def list_image(env: BaseEnvironment, local: Path) -> dict[str, tuple[int, str]]:
    """path -> (size, mtime) of every file of the image in the sandbox, the listing fetched
    through `local` (the audit's and the cheat agent's before/after comparisons)."""
    remote = f"/tmp/.aes-{local.stem}"
    prune = " -o ".join(f"-path {p}" for p in _PRUNE)
    result = await env.exec(
        f"find / -xdev \\( {prune} \\) -prune -o -type f -printf '%s\\t%T@\\t%p\\0' "
        f"> {remote} 2>/dev/null; test -s {remote}",
        user="root",
    )
    if result.return_code != 0:
        raise RuntimeError(f"cannot list the image (GNU find missing?): {result.stderr}")
    await env.download_file(remote, local)
    await env.exec(f"rm -f {remote}", user="root")
    out: dict[str, tuple[int, str]] = {}
    for record in local.read_bytes().split(b"\0"):
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


TamperMode = Literal[
    "forge", "stub", "shadow", "status", "tamperer", "interpreters", "program", "git", "customize"
]

_FORGE = """mkdir -p /logs/verifier
echo 1 > /logs/verifier/reward.txt
echo '{"reward": 1.0}' > /logs/verifier/reward.json
chmod 444 /logs/verifier/reward.txt /logs/verifier/reward.json
echo /logs/verifier/reward.txt; echo /logs/verifier/reward.json"""

# Replace (or wrap) a program the verifier runs with one that always passes.
_STUB_ONE = """p={path}
if [ -f "$p" ]; then
  case "$p" in
    *.py) printf 'import sys\\nsys.exit(0)\\n' > "$p" ;;
    *) printf '#!/bin/sh\\nexit 0\\n' > "$p"; chmod +x "$p" ;;
  esac && echo "$p"
fi"""

# A module that ends whichever process imports it, successfully: a test runner that imports it
# "passes"; the agent's own program run by a checker just stops (and fails that check).
SHADOW_MODULE = "import os\nos._exit(0)\n"

_SHADOW_ONE = """d={folder}
mkdir -p "$d" && for m in {modules}; do
  printf '%s' {module} > "$d/$m.py" && echo "$d/$m.py"
done"""

_STATUS_ONE = """p={path}
mkdir -p "$(dirname "$p")" && printf '%s\\n' {text} > "$p" && echo "$p"
"""

# Left running after the agent phase: once /tests arrives it stubs the tests, copies files of
# tests/ named like an output into place, and keeps rewriting the reward files; it marks
# that it was alive during verification.
_TAMPERER = """cat > /tmp/.aes-tamperer.sh <<'AES_EOF'
end=$((SECONDS + {seconds}))
while [ $SECONDS -lt $end ]; do
  if [ -d /tests ]; then
    mkdir -p /logs/verifier
    : > /logs/verifier/.aes-tamperer-alive
    for f in /tests/*.sh; do
      [ -f "$f" ] && printf '#!/bin/sh\\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\\n' > "$f"
    done
    for out in {outputs}; do
      src="/tests/$(basename "$out")"; [ -f "$src" ] && cp "$src" "$out" 2>/dev/null
    done
    echo 1 > /logs/verifier/.aes-r.txt && mv -f /logs/verifier/.aes-r.txt /logs/verifier/reward.txt
    echo '{{"reward": 1.0}}' > /logs/verifier/.aes-r.json \\
      && mv -f /logs/verifier/.aes-r.json /logs/verifier/reward.json
  fi
  sleep 0.01
done
AES_EOF
nohup setsid bash /tmp/.aes-tamperer.sh > /dev/null 2>&1 < /dev/null &
echo tamperer-started"""

# A program of the agent's that the verifier runs: it writes the reward files, leaves a writer
# behind that keeps them at 1 for a minute (a reward read after the tests), and exits 0. The
# writer renames a whole file into place: a truncate-then-write can be read empty (Harbor then
# errors the trial instead of scoring the forgery, and the probe would look held).
FORGE_SH = """#!/bin/sh
# autoenvscaling anti-cheat probe: a program of the agent's that writes the reward
mkdir -p /logs/verifier 2>/dev/null
echo 1 > /logs/verifier/reward.txt 2>/dev/null
echo '{"reward": 1.0}' > /logs/verifier/reward.json 2>/dev/null
( i=0; while [ $i -lt 1200 ]; do
    echo '{"reward": 1.0}' > /logs/verifier/.aes-f.json 2>/dev/null \\
      && mv -f /logs/verifier/.aes-f.json /logs/verifier/reward.json 2>/dev/null
    i=$((i + 1)); sleep 0.05
  done ) </dev/null >/dev/null 2>&1 &
exit 0
"""
# The same as Python: at import (a module, sitecustomize) and again at the interpreter's exit.
FORGE_PY = """# autoenvscaling anti-cheat probe: Python of the agent's that writes the reward
import atexit as _aes_atexit
import os as _aes_os


def _aes_forge():
    try:
        _aes_os.makedirs("/logs/verifier", exist_ok=True)
        with open("/logs/verifier/reward.txt", "w") as f:
            f.write("1\\n")
        with open("/logs/verifier/reward.json", "w") as f:
            f.write('{"reward": 1.0}\\n')
    except OSError:
        pass


_aes_forge()
_aes_atexit.register(_aes_forge)
"""

_PROGRAM_ONE = """p={path}
if [ ! -d "$p" ] && mkdir -p "$(dirname "$p")" 2>/dev/null; then
  case "$p" in
    *.py) printf '%s' {py} > "$p" ;;
    *) printf '%s' {sh} > "$p" ;;
  esac && chmod 755 "$p" && echo "$p"
fi"""

# Every git repository in the work: its own config names the forging program as fsmonitor hook,
# clean/smudge filter (for every path) and hooks, which `git status` and friends then run.
_GIT = """for d in {dirs}; do
  [ -d "$d" ] || continue
  find "$d" -xdev -maxdepth 6 -name .git -type d 2>/dev/null
done | sort -u | while read -r g; do
  printf '%s' {sh} > "$g/aes-forge.sh"
  {{ printf '%s' {sh} | sed '$d'; echo 'exec cat'; }} > "$g/aes-filter.sh"
  chmod 755 "$g/aes-forge.sh" "$g/aes-filter.sh"
  printf '[core]\n\tfsmonitor = %s\n[filter "aesforge"]\n\tclean = %s\n\tsmudge = %s\n' \
    "$g/aes-forge.sh" "$g/aes-filter.sh" "$g/aes-filter.sh" >> "$g/config"
  mkdir -p "$g/info" "$g/hooks" && echo '* filter=aesforge' >> "$g/info/attributes"
  for h in post-index-change reference-transaction post-checkout post-merge pre-commit \
      pre-auto-gc post-rewrite; do
    cp "$g/aes-forge.sh" "$g/hooks/$h"
  done
  echo "$(dirname "$g")"
done"""

_CUSTOMIZE_ONE = """d={folder}
if [ -d "$d" ]; then for m in sitecustomize usercustomize; do
  printf '%s' {py} > "$d/$m.py" && echo "$d/$m.py"
done; fi"""

_INTERPRETERS = """for name in python3 python pytest; do
  printf '#!/bin/sh\\nexit 0\\n' > /usr/local/bin/$name && chmod 755 /usr/local/bin/$name \\
    && echo /usr/local/bin/$name
done"""


class TamperAgent(PlainAgent):
    """Does no work; only tampers with what the verifier will read or run (see module doc).

    `modes` run in order in one trial; the `anti_cheat` stage runs the cheap ones together and
    splits them only when the combination scores.
    """

    def __init__(
        self,
        *args: Any,
        mode: TamperMode | None = None,
        modes: list[TamperMode] | None = None,
        stub_paths: list[str] | None = None,
        shadow_modules: list[str] | None = None,
        shadow_dirs: list[str] | None = None,
        status_files: dict[str, str] | None = None,
        outputs: list[str] | None = None,
        work_dirs: list[str] | None = None,
        python_dirs: list[str] | None = None,
        tamper_seconds: int = 900,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.modes: list[TamperMode] = list(modes or [mode or "forge"])
        self.stub_paths = list(stub_paths or [])
        self.shadow_modules = list(shadow_modules or [])
        self.shadow_dirs = list(shadow_dirs or [])
        self.status_files = dict(status_files or {})
        self.outputs = list(outputs or [])
        self.work_dirs = list(work_dirs or [])
        self.python_dirs = list(python_dirs or [])
        self.tamper_seconds = tamper_seconds

    @staticmethod
    @override
    def name() -> str:
        return "autoenvscaling-tamper"

    @override
    def version(self) -> str:
        return "3"

    def script_for(self, mode: TamperMode, workdir: str) -> str:
        q = shlex.quote
        if mode == "forge":
            return _FORGE
        if mode == "interpreters":
            return _INTERPRETERS
        if mode == "program":
            return (
                "\n".join(
                    _PROGRAM_ONE.format(path=q(p), py=q(FORGE_PY), sh=q(FORGE_SH))
                    for p in self.stub_paths
                )
                or "true"
            )
        if mode == "git":
            dirs = " ".join(q(d) for d in dict.fromkeys([workdir, *self.work_dirs]))
            return _GIT.format(dirs=dirs, sh=q(FORGE_SH))
        if mode == "customize":
            folders = dict.fromkeys([workdir, *self.shadow_dirs, *self.python_dirs])
            return "\n".join(_CUSTOMIZE_ONE.format(folder=q(f), py=q(FORGE_PY)) for f in folders)
        if mode == "stub":
            return "\n".join(_STUB_ONE.format(path=q(p)) for p in self.stub_paths) or "true"
        if mode == "shadow":
            folders = dict.fromkeys([workdir, *self.shadow_dirs])
            modules = " ".join(q(m) for m in self.shadow_modules if m.isidentifier())
            if not modules:
                return "true"
            return "\n".join(
                _SHADOW_ONE.format(folder=q(f), modules=modules, module=q(SHADOW_MODULE))
                for f in folders
            )
        if mode == "status":
            return (
                "\n".join(
                    _STATUS_ONE.format(path=q(p), text=q(t)) for p, t in self.status_files.items()
                )
                or "true"
            )
        outputs = " ".join(q(p) for p in self.outputs) or "''"
        return _TAMPERER.format(seconds=int(self.tamper_seconds), outputs=outputs)

    def script(self) -> str:
        """The whole tampering, for a workdir of /app (what a log shows)."""
        return "\n".join(self.script_for(m, "/app") for m in self.modes)

    @override
    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        workdir = ((await environment.exec("pwd")).stdout or "").strip() or "/"
        tampered: dict[str, list[str]] = {}
        codes: dict[str, int] = {}
        for mode in self.modes:
            result = await environment.exec(self.script_for(mode, workdir), user="root")
            tampered[mode] = [x for x in (result.stdout or "").splitlines() if x.strip()]
            codes[mode] = result.return_code
        context.metadata = {
            **(context.metadata or {}),
            "modes": list(self.modes),
            "tampered": tampered,
            "exit_codes": codes,
        }
