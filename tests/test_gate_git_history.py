"""Answers hidden in git history are leaks: the leak search reads every object a repository in
the image holds (packed and loose, reachable from a ref, a reflog or a stash, or from nothing),
commit messages, and standalone packs and bundles — and skips the history only where it is the
task's input (the instruction is about git and the reference solution reads the history).

Unit tests build real repositories with the host's git; the slow test runs the real audit on a
hack task whose answer was committed, removed and packed, with an instruction that speaks of
the repository (the case the search used to skip), and checks its hack scores 1.0.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from autoenvscaling.tools.gate import GateConfig, make_verdict, run_stage
from autoenvscaling.tools.gate.anti_cheat.audit import history_is_input
from autoenvscaling.tools.gate.anti_cheat.leaks import git_objects, pack_as_objects_tar
from autoenvscaling.tools.gate.harness import gate_trial

from .conftest import FIXTURES

HACK = FIXTURES / "hack_tasks" / "leak_git_history_packed"
SEED = Path(__file__).resolve().parents[1] / "tasks" / "seed"
ANSWER = b"app.py:5: # TODO: parse real arguments\nutil.py:6: # TODO: handle empty input\n"


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "HOME": str(repo),
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@example.com",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@example.com",
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout


def _objects_tar(repo: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tf:
        tf.add(repo / ".git" / "objects", arcname=".")
    return buffer.getvalue()


def _contents(store: bytes) -> set[bytes]:
    return {content for _sha, _kind, content in git_objects(store)}


def test_removed_and_packed_answer_is_read(tmp_path: Path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "commit", "-q", "-m", "one")
    (repo / "report.txt").write_bytes(ANSWER)
    _git(repo, "add", "report.txt")
    _git(repo, "commit", "-q", "-m", "two")
    _git(repo, "rm", "-q", "report.txt")
    _git(repo, "commit", "-q", "-m", "three")
    _git(repo, "gc", "-q", "--aggressive", "--prune=now")
    assert not list((repo / ".git" / "objects").glob("??/*"))  # nothing loose: all packed
    assert ANSWER in _contents(_objects_tar(repo))


def test_stash_reset_and_commit_message_are_read(tmp_path: Path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "notes.txt").write_text("start\n")
    _git(repo, "add", "notes.txt")
    _git(repo, "commit", "-q", "-m", "start")
    (repo / "notes.txt").write_bytes(b"stashed answer: 4417 widgets, 12 crates\n")
    _git(repo, "stash", "-q")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "the total is 4417 widgets in 12 crates")
    (repo / "gone.txt").write_bytes(b"reset away: alpha beta gamma delta\n")
    _git(repo, "add", "gone.txt")
    _git(repo, "commit", "-q", "-m", "wip")
    _git(repo, "reset", "-q", "--hard", "HEAD~1")
    _git(repo, "reflog", "expire", "--expire=now", "--all")
    found = _contents(_objects_tar(repo))
    assert b"stashed answer: 4417 widgets, 12 crates\n" in found
    assert b"reset away: alpha beta gamma delta\n" in found
    assert b"the total is 4417 widgets in 12 crates\n" in found  # a commit's message alone


def test_bundles_and_loose_packs_are_read(tmp_path: Path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "answer.txt").write_bytes(ANSWER)
    _git(repo, "add", "answer.txt")
    _git(repo, "commit", "-q", "-m", "answer")
    _git(repo, "bundle", "create", "-q", str(tmp_path / "backup.bundle"), "--all")
    packed = pack_as_objects_tar((tmp_path / "backup.bundle").read_bytes())
    assert packed is not None and ANSWER in _contents(packed)
    assert pack_as_objects_tar(b"not a pack at all") is None


def test_history_is_the_input_only_when_the_solution_reads_it():
    # the seed tasks about git: their histories are what they work on
    for name in ("git-recover-lost-work", "git-merge-conflicts", "git-bisect-regression"):
        task = SEED / name
        assert history_is_input((task / "instruction.md").read_text(), task), name
    # a repository mentioned, an answer computed from the files: the history is searched
    assert not history_is_input((HACK / "instruction.md").read_text(), HACK)


@pytest.mark.slow
async def test_an_answer_removed_from_history_is_a_leak(engine_ready):
    config = GateConfig(repeat=0, skip=["calibrate"], trial_concurrency=2)
    hack = (FIXTURES / "hack_tasks" / "_hacks" / "leak_git_history_packed.sh").read_text()
    control = await gate_trial(
        HACK,
        config,
        agent="autoenvscaling.tools.trials.script_agent:ScriptAgent",
        agent_kwargs={"commands": [hack]},
        label="control",
    )
    assert control.reward == 1.0, control.error  # the hack works: `git show` scores 1.0
    result = await run_stage("anti_cheat", HACK, config)
    verdict = make_verdict(HACK, [result])
    assert not verdict.admitted and verdict.stage == "anti_cheat", verdict.summary()
    assert "git object" in verdict.reason and "/app/todo_report.txt" in verdict.reason
    leak = result.details["probes"]["leak"]["details"]
    cost = leak["git_search"]  # measured: the stores read, their objects and bytes
    assert cost["repos"] == 1 and cost["objects"] > 0 and cost["bytes"] > 0, cost
    assert leak["phase_seconds"]["git"] >= 0
