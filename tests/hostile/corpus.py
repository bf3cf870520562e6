"""A corpus of malformed and hostile task folders, generated from one table.

Each case starts from the admitted control task (tests/fixtures/good_task) and plants one defect,
so the defect alone decides the verdict. `stage` is where the gate must reject it and `words` what
its reason must contain (the field, the value, the allowed range or the file). `trial` marks the
cases only a real trial can judge (a sandbox runs them); the others are judged by lint.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOOD = FIXTURES / "good_task"

#: Gate settings the corpus runs under (environment fallbacks of GateConfig).
GATE_ENV = {
    "AUTOENVSCALING_GATE_MAX_TRIAL_SEC": "40",
    "AUTOENVSCALING_GATE_MAX_ARTIFACT_BYTES": "200000",
}

Build = Callable[[Path], None]


@dataclass(frozen=True)
class Case:
    name: str
    build: Build
    stage: str
    words: tuple[str, ...]
    trial: bool = False
    keep_base: bool = True  # start from a copy of the good task
    tags: tuple[str, ...] = field(default=())


# --------------------------------------------------------------------------- helpers


def _toml(section: str, key: str, value: str) -> Build:
    """Set `key = value` (raw TOML) in `[section]` of the good task's task.toml."""

    def build(task: Path) -> None:
        path = task / "task.toml"
        lines = path.read_text().splitlines()
        out, in_section, done = [], False, False
        for line in lines:
            if line.startswith("["):
                if in_section and not done:
                    out.append(f"{key} = {value}")
                    done = True
                in_section = line.strip() == f"[{section}]"
            if in_section and line.split("=", 1)[0].strip() == key:
                line, done = f"{key} = {value}", True
            out.append(line)
        if in_section and not done:
            out.append(f"{key} = {value}")
        elif not done:
            out += ["", f"[{section}]", f"{key} = {value}"]
        path.write_text("\n".join(out) + "\n")

    return build


def _drop_key(key: str) -> Build:
    def build(task: Path) -> None:
        path = task / "task.toml"
        kept = [ln for ln in path.read_text().splitlines() if ln.split("=", 1)[0].strip() != key]
        path.write_text("\n".join(kept) + "\n")

    return build


def _write(rel: str, data: str | bytes, mode: int | None = None) -> Build:
    def build(task: Path) -> None:
        path = task / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        if mode is not None:
            path.chmod(mode)

    return build


def _all(*steps: Build) -> Build:
    def build(task: Path) -> None:
        for step in steps:
            step(task)

    return build


def _sparse(rel: str, size: int) -> Build:
    """A file of `size` bytes that takes no disk space."""

    def build(task: Path) -> None:
        with open(task / rel, "wb") as handle:
            handle.truncate(size)

    return build


def _fifo(rel: str) -> Build:
    def build(task: Path) -> None:
        (task / rel).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(task / rel)

    return build


def _socket(rel: str) -> Build:
    def build(task: Path) -> None:
        sock = socket.socket(socket.AF_UNIX)
        here = os.getcwd()
        os.chdir(task / Path(rel).parent)  # socket paths are limited to ~100 bytes
        try:
            sock.bind(Path(rel).name)
        finally:
            os.chdir(here)
            sock.close()

    return build


def _symlink(rel: str, target: str) -> Build:
    def build(task: Path) -> None:
        (task / rel).unlink(missing_ok=True)
        os.symlink(target, task / rel)

    return build


def _raw_name(folder: str, name: bytes) -> Build:
    def build(task: Path) -> None:
        with open(os.fsencode(task / folder) + b"/" + name, "wb") as handle:
            handle.write(b"x\n")

    return build


def _many_files(n: int) -> Build:
    def build(task: Path) -> None:
        folder = task / "environment" / "many"
        folder.mkdir()
        for i in range(n):
            (folder / f"f{i}.txt").write_bytes(b"")

    return build


def _deep(levels: int) -> Build:
    def build(task: Path) -> None:
        folder = task / "environment"
        for i in range(levels):
            folder = folder / f"d{i}"
        folder.mkdir(parents=True)
        (folder / "leaf.txt").write_text("deep\n")

    return build


def _reward_writer(body: str) -> Build:
    """A test.sh that writes what `body` says as the reward, whatever the agent did."""
    script = f"#!/bin/bash\nmkdir -p /logs/verifier\n{body}\n"
    return _write("tests/test.sh", script, 0o755)


def _solve(body: str) -> Build:
    return _write("solution/solve.sh", f"#!/bin/bash\n{body}\n", 0o755)


def _empty(task: Path) -> None:
    task.mkdir()


def _as_file(task: Path) -> None:
    task.write_text("not a folder\n")


def _missing(task: Path) -> None:
    pass


def _remove(rel: str) -> Build:
    def build(task: Path) -> None:
        path = task / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()

    return build


# --------------------------------------------------------------------------- the table

LIMITS = ("outside the allowed range",)
FINITE = ("must be finite",)

CASES: list[Case] = [
    # task.toml that cannot be parsed
    Case("toml-syntax", _write("task.toml", "schema_version = \n[[["), "lint", ("invalid TOML",)),
    Case(
        "toml-array-bomb",
        _write("task.toml", "x = " + "[" * 20_000 + "]" * 20_000 + "\n"),
        "lint",
        ("task.toml", "nested deeper"),
    ),
    Case(
        "toml-inline-table-bomb",
        _write("task.toml", "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n"),
        "lint",
        ("task.toml", "nested deeper"),
    ),
    Case(
        "toml-dotted-table-depth",
        _write("task.toml", "[metadata." + ".".join(f"k{i}" for i in range(40)) + "]\nx = 1\n"),
        "lint",
        ("task.toml", "nested deeper"),
    ),
    Case(
        "toml-too-large", _write("task.toml", "# pad\n" * 20_000), "lint", ("task.toml", "65,536")
    ),
    # numbers out of range: field, value and allowed range in the reason
    Case(
        "agent-timeout-inf",
        _toml("agent", "timeout_sec", "inf"),
        "lint",
        ("agent.timeout_sec", "inf", *FINITE),
    ),
    Case(
        "agent-timeout-negative",
        _toml("agent", "timeout_sec", "-1"),
        "lint",
        ("agent.timeout_sec", "-1", *LIMITS, "<= 12000"),
    ),
    Case(
        "verifier-timeout-nan",
        _toml("verifier", "timeout_sec", "nan"),
        "lint",
        ("verifier.timeout_sec", "nan", *FINITE),
    ),
    Case(
        "verifier-timeout-1e9",
        _toml("verifier", "timeout_sec", "1e9"),
        "lint",
        (
            "verifier.timeout_sec",
            "1000000000.0",
            *LIMITS,
            "<= 12000",
            "AUTOENVSCALING_TASK_MAX_VERIFIER_TIMEOUT_SEC",
        ),
    ),
    Case(
        "verifier-timeout-zero",
        _toml("verifier", "timeout_sec", "0"),
        "lint",
        ("verifier.timeout_sec", "> 0", *LIMITS),
    ),
    Case(
        "verifier-timeout-negative-float",
        _toml("verifier", "timeout_sec", "-5.0"),
        "lint",
        ("verifier.timeout_sec", "-5.0", *LIMITS),
    ),
    Case(
        "build-timeout-huge",
        _toml("environment", "build_timeout_sec", "1e12"),
        "lint",
        ("environment.build_timeout_sec", *LIMITS, "<= 1800"),
    ),
    Case(
        "memory-negative",
        _toml("environment", "memory_mb", "-1"),
        "lint",
        ("environment.memory_mb", "-1", ">= 64", "<= 16384"),
    ),
    Case(
        "memory-one",
        _toml("environment", "memory_mb", "1"),
        "lint",
        ("environment.memory_mb", "is 1,", ">= 64"),
    ),
    Case(
        "memory-huge",
        _toml("environment", "memory_mb", "1000000000"),
        "lint",
        ("environment.memory_mb", "1000000000", "<= 16384"),
    ),
    Case(
        "memory-bigint",
        _toml("environment", "memory_mb", "9" * 40),
        "lint",
        ("environment.memory_mb", *LIMITS),
    ),
    Case(
        "memory-deprecated-string",
        _all(_drop_key("memory_mb"), _toml("environment", "memory", '"4000G"')),
        "lint",
        ("environment.memory_mb", "4096000", *LIMITS),
    ),
    Case(
        "cpus-zero", _toml("environment", "cpus", "0"), "lint", ("environment.cpus", "> 0", *LIMITS)
    ),
    Case(
        "cpus-huge",
        _toml("environment", "cpus", "512"),
        "lint",
        ("environment.cpus", "512", "<= 8"),
    ),
    Case(
        "storage-huge",
        _toml("environment", "storage_mb", "100000000"),
        "lint",
        ("environment.storage_mb", "100000000", "<= 65536"),
    ),
    # More GPUs than one machine holds: a limit (1 to 8 on a gate without GPUs is `needs a GPU`,
    # not judged: tests/test_gate_gpu.py).
    Case("gpus", _toml("environment", "gpus", "64"), "lint", ("environment.gpus", "<= 0")),
    Case(
        "metadata-inf",
        _toml("metadata", "expert_time_estimate_min", "-inf"),
        "lint",
        ("metadata.expert_time_estimate_min", *FINITE),
    ),
    # special files, links
    Case("fifo-in-tests", _fifo("tests/pipe"), "lint", ("tests/pipe", "FIFO")),
    Case(
        "fifo-in-environment",
        _fifo("environment/data.pipe"),
        "lint",
        ("environment/data.pipe", "FIFO"),
    ),
    Case("socket-in-solution", _socket("solution/sock"), "lint", ("solution/sock", "socket")),
    Case(
        "symlink-instruction-out",
        _symlink("instruction.md", "/etc/passwd"),
        "lint",
        ("instruction.md", "symlink"),
    ),
    Case("symlink-dir-out", _symlink("tests/etc", "/etc"), "lint", ("tests/etc", "symlink")),
    Case(
        "symlink-loop",
        _symlink("environment/loop", "loop"),
        "lint",
        ("environment/loop", "symlink"),
    ),
    Case(
        "symlink-dangling",
        _symlink("solution/helper.sh", "/nonexistent/helper.sh"),
        "lint",
        ("solution/helper.sh", "symlink"),
    ),
    # sizes and counts
    Case(
        "huge-file",
        _sparse("environment/big.bin", 25_000_000),
        "lint",
        ("environment/big.bin", "25,000,000", "20,000,000"),
    ),
    Case(
        "huge-total",
        _all(*(_sparse(f"environment/part{i}.bin", 19_000_000) for i in range(3))),
        "lint",
        ("files total", "50,000,000"),
    ),
    Case("many-files", _many_files(2100), "lint", ("more than 2000 files",)),
    Case("deep-folders", _deep(20), "lint", ("nested", "folders deep", "16")),
    Case(
        "huge-instruction",
        _write("instruction.md", "word " * 40_000),
        "lint",
        ("instruction.md", "100,000"),
    ),
    Case(
        "binary-instruction",
        _write("instruction.md", b"\xff\xfe\x00\x01binary"),
        "lint",
        ("instruction.md", "not valid UTF-8"),
    ),
    # absurd names
    Case(
        "name-newline",
        _write("tests/evil\nname.py", "x = 1\n"),
        "lint",
        ("control or invisible characters",),
    ),
    Case(
        "name-escape",
        _write("environment/\x1b[31mred.txt", "x\n"),
        "lint",
        ("control or invisible characters",),
    ),
    Case(
        "name-bidi",
        _write("environment/\u202etxt.exe", "x\n"),
        "lint",
        ("control or invisible characters",),
    ),
    Case("name-too-long", _write("environment/" + "n" * 240, "x\n"), "lint", ("240 bytes long",)),
    Case("name-dash", _write("tests/-rf", "x\n"), "lint", ("starts with '-'",)),
    Case("name-not-utf8", _raw_name("environment", b"\xff\xfe.txt"), "lint", ("not valid UTF-8",)),
    # not a task at all
    Case("empty-folder", _empty, "lint", ("missing",), keep_base=False),
    Case("not-a-folder", _as_file, "lint", ("is not a folder",), keep_base=False),
    Case("does-not-exist", _missing, "lint", ("does not exist",), keep_base=False),
    Case(
        "instruction-is-folder",
        _all(_remove("instruction.md"), _write("instruction.md/x", "x\n")),
        "lint",
        ("instruction.md", "not a regular file"),
    ),
    # only a trial can tell: rewards, hangs, floods, bombs
    Case(
        "reward-nan",
        _reward_writer("echo nan > /logs/verifier/reward.txt"),
        "oracle",
        ("finite",),
        trial=True,
    ),
    Case(
        "reward-inf",
        _reward_writer("echo inf > /logs/verifier/reward.txt"),
        "oracle",
        ("finite",),
        trial=True,
    ),
    Case(
        "reward-negative",
        _reward_writer("echo -1 > /logs/verifier/reward.txt"),
        "oracle",
        ("reward is -1", "outside [0, 1]"),
        trial=True,
    ),
    Case(
        "reward-above-one",
        _reward_writer("echo 1.5 > /logs/verifier/reward.txt"),
        "oracle",
        ("reward is 1.5", "outside [0, 1]"),
        trial=True,
    ),
    Case(
        "reward-garbage",
        _reward_writer("echo hello > /logs/verifier/reward.txt"),
        "oracle",
        ("cannot be parsed",),
        trial=True,
    ),
    Case(
        "reward-huge-number",
        _reward_writer("head -c 3000000 /dev/zero | tr '\\0' 9 > /logs/verifier/reward.txt"),
        "oracle",
        ("finite",),
        trial=True,
    ),
    Case(
        "verifier-hangs",
        _all(
            _toml("verifier", "timeout_sec", "5"),
            _reward_writer("sleep 600\necho 1 > /logs/verifier/reward.txt"),
        ),
        "oracle",
        ("verifier did not finish",),
        trial=True,
    ),
    Case(
        "solution-hangs-past-gate-cap",
        _all(_toml("agent", "timeout_sec", "1800"), _solve("sleep 100000")),
        "oracle",
        ("wall-time cap", "40 s"),
        trial=True,
    ),
    Case(
        "output-flood",
        _reward_writer(
            "head -c 30000000 /dev/zero | tr '\\0' x\necho 1 > /logs/verifier/reward.txt"
        ),
        "nop",
        ("pass on the initial state",),
        trial=True,
    ),
    Case(
        "fork-bomb",
        _all(_toml("agent", "timeout_sec", "8"), _solve("b() { b | b & }; b; sleep 60")),
        "oracle",
        ("agent phase did not finish",),
        trial=True,
    ),
]


def device_case() -> Case | None:
    """A character device in the task, where this process may create one (root)."""
    probe = Path(os.environ.get("TMPDIR", "/tmp")) / f".aes-mknod-probe-{os.getpid()}"
    try:
        os.mknod(probe, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except OSError:
        return None
    probe.unlink()

    def build(task: Path) -> None:
        os.mknod(task / "environment" / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))

    return Case("device-in-environment", build, "lint", ("environment/null", "device file"))


def make_corpus(dest: Path) -> dict[str, tuple[Case, Path]]:
    """Write every case as a real folder under `dest`: name -> (case, task folder)."""
    cases = list(CASES)
    if (device := device_case()) is not None:
        cases.append(device)
    out: dict[str, tuple[Case, Path]] = {}
    for case in cases:
        task = dest / case.name
        if case.keep_base:
            shutil.copytree(GOOD, task)
        case.build(task)
        out[case.name] = (case, task)
    return out
