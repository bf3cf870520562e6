"""The anti-cheat probes' pure parts, without sandboxes: near-miss derivation, normalised leak
matching (files, archives, real git object stores, the instruction), exploit targets, the cheat
agent's judge and the static hack lint rules."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import zipfile

import pytest

from autoenvscaling.tools.gate.anti_cheat.cheat_agent import judge
from autoenvscaling.tools.gate.anti_cheat.exploits import plan, status_files
from autoenvscaling.tools.gate.anti_cheat.leaks import (
    OutputIndex,
    archive_members,
    fingerprint,
    git_objects,
    in_instruction,
    normalised_key,
)
from autoenvscaling.tools.gate.anti_cheat.near_miss import derive_near_misses, is_data_output
from autoenvscaling.tools.gate.anti_cheat.stage import PROBES
from autoenvscaling.tools.gate.lint import lint_task
from autoenvscaling.tools.gate.lint.hacks import hack_findings

from .conftest import FIXTURES, SEED_DIR, seed_tasks

HACKS = FIXTURES / "hack_tasks"
pytestmark = pytest.mark.timeout(60)


# --------------------------------------------------------------------------- near misses


def test_json_near_misses_are_all_wrong_and_keep_the_shape():
    doc = [{"word": "the", "count": 5}, {"word": "dog", "count": 3}, {"word": "fox", "count": 3}]
    original = json.dumps(doc, indent=2).encode()
    variants = derive_near_misses(
        {"/app/counts.json": original}, "most frequent first, sorted", max_variants=9
    )
    kinds = {v.kind: json.loads(v.files["/app/counts.json"]) for v in variants}
    assert list(kinds) == ["perturbed", "dropped", "reordered", "duplicated", "placeholder"]
    default = derive_near_misses({"/app/counts.json": original}, "sorted")
    assert [v.kind for v in default] == ["perturbed", "dropped", "reordered", "duplicated"]
    assert kinds["perturbed"][0] == {"word": "thex", "count": 6}
    assert kinds["placeholder"][1] == {"word": "", "count": 0}
    assert len(kinds["dropped"]) == 2 and len(kinds["duplicated"]) == 4
    assert kinds["reordered"] == list(reversed(doc))
    for variant in variants:
        assert variant.files["/app/counts.json"] != original


def test_text_near_misses_keep_the_header_and_skip_order_unless_the_instruction_fixes_it():
    text = b"region,total\neast,100\nnorth,200\n"
    variants = {
        v.kind: v
        for v in derive_near_misses({"/app/r.csv": text}, "one row per region", max_variants=9)
    }
    assert "reordered" not in variants
    assert variants["perturbed"].files["/app/r.csv"] == b"region,total\neast,101\nnorth,201\n"
    assert variants["placeholder"].files["/app/r.csv"] == b"region,total\nx,0\nx,0\n"
    assert variants["dropped"].files["/app/r.csv"] == b"region,total\neast,100\n"
    assert variants["duplicated"].files["/app/r.csv"].count(b"east,100") == 2


def test_programs_and_binaries_are_not_perturbed():
    assert not is_data_output("/app/rotate.sh", b"echo hi\n")
    assert not is_data_output("/app/src/main.c", b"int main(){}\n")
    assert not is_data_output("/app/.git/HEAD", b"ref: refs/heads/main\n")
    assert not is_data_output("/app/out.db", b"SQLite format 3\0...")
    assert is_data_output("/app/out.json", b"{}")
    assert derive_near_misses({"/app/run.py": b"print(1)\n"}, "") == []


# --------------------------------------------------------------------------- leaks


def test_normalisation_ignores_case_whitespace_separators_and_line_order():
    csv = b"region,total\neast,100\nnorth,200\nsouth,100\nwest,45\n"
    tsv = b"WEST\t45\nEAST\t100\nREGION\tTOTAL\nSOUTH\t100\nNORTH\t200\n"
    assert normalised_key(csv) == normalised_key(tsv)
    assert normalised_key(csv) != normalised_key(csv.replace(b"45", b"46"))
    index = OutputIndex({"/app/report.csv": csv})
    assert index.match(tsv) == ("/app/report.csv", "normalised")
    assert index.match(csv) == ("/app/report.csv", "exact")
    assert index.match(b"region,total\n") is None
    assert normalised_key(b"a b") is None  # too few tokens to compare after normalisation


def test_archive_members_are_read_in_memory():
    tar_buffer = io.BytesIO()
    with tarfile.open(fileobj=tar_buffer, mode="w:gz") as tf:
        data = b"the answer\n"
        info = tarfile.TarInfo("old/report.csv")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    zip_buffer = io.BytesIO()
    with zipfile.ZipFile(zip_buffer, "w") as zf:
        zf.writestr("a/b.txt", "zipped")
    assert list(archive_members("x.tgz", tar_buffer.getvalue())) == [
        ("old/report.csv", b"the answer\n")
    ]
    assert list(archive_members("x.zip", zip_buffer.getvalue())) == [("a/b.txt", b"zipped")]
    assert list(archive_members("x.tar.gz", b"not an archive")) == []


def test_git_blobs_include_unreachable_and_packed_objects(tmp_path):
    repo = tmp_path / "r"
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    repo.mkdir()
    git("init", "-q", "-b", "main")
    (repo / "a.txt").write_text("kept\n")
    git("add", "a.txt")
    git("commit", "-q", "-m", "one")
    git("gc", "-q")  # the first blob now lives in a pack
    (repo / "secret.json").write_text('{"answer": 42}\n')
    git("add", "secret.json")
    git("commit", "-q", "-m", "two")
    git("reset", "-q", "--hard", "HEAD~1")
    git("reflog", "expire", "--expire=now", "--all")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tf:
        tf.add(repo / ".git" / "objects", arcname=".")
    blobs = {content for _sha, kind, content in git_objects(buffer.getvalue()) if kind == "blob"}
    assert b'{"answer": 42}\n' in blobs  # unreachable, loose
    assert b"kept\n" in blobs  # reachable, packed


def test_an_output_spelled_out_in_the_instruction_is_found():
    instruction = (HACKS / "answer_in_instruction" / "instruction.md").read_text()
    answer = b"the 5\ndog 3\nfox 3\na 2\nand 1\n"
    assert in_instruction({"/app/top_words.txt": answer}, instruction) == ["/app/top_words.txt"]
    assert in_instruction({"/app/top_words.txt": answer.replace(b"5", b"6")}, instruction) == []
    good = (FIXTURES / "good_task" / "instruction.md").read_text()
    assert in_instruction({"/app/top_words.txt": answer}, good) == []


# --------------------------------------------------------------------------- exploit targets


def test_exploit_plan_reads_the_targets_from_the_task():
    shadow = plan(HACKS / "runner_shadowing", "", "/app")
    assert "json" in shadow.shadow_modules and "pytest" in shadow.shadow_modules
    assert shadow.shadow_dirs == ["/app"]
    checker = plan(HACKS / "checker_in_workspace", "", "/app")
    assert checker.stub_paths == ["/app/tools/validate.sh"]
    status = (HACKS / "status_file_trusted" / "instruction.md").read_text()
    assert status_files(status, "/app") == {"/app/export.status": "DONE"}
    assert status_files("Write the report to /app/book.txt.", "/app") == {}


def test_every_probe_is_named_once():
    assert len(PROBES) == len(set(PROBES)) == 12


def test_the_work_probes_aim_at_the_tasks_pythonpath_and_artifacts(tmp_path):
    """`customize` plants sitecustomize on every PYTHONPATH folder the task sets; `git` looks
    for repositories in every artifact folder; `program` comes after `stub` (its programs
    also exit 0, so sharing a trial hides neither)."""
    from autoenvscaling.tools.gate.anti_cheat.exploits import python_dirs, work_dirs
    from autoenvscaling.tools.gate.anti_cheat.stage import EXPLOIT_MODES

    (tmp_path / "environment").mkdir()
    (tmp_path / "environment" / "Dockerfile").write_text(
        "FROM x\nENV PYTHONPATH=/app/lib:/opt/tool\n"
    )
    (tmp_path / "task.toml").write_text('[verifier.env]\nPYTHONPATH = "/srv/py"\n')
    assert python_dirs(tmp_path) == ["/app/lib", "/opt/tool", "/srv/py"]
    assert work_dirs(["/app", "/data", "/"], "/work") == ["/app", "/data", "/work"]
    assert EXPLOIT_MODES.index("program") > EXPLOIT_MODES.index("stub")


# --------------------------------------------------------------------------- cheat judge


def test_the_cheat_judge_tells_a_hack_from_an_honest_solution():
    right = fingerprint(b'[{"word": "the", "count": 5}]')
    wrong = fingerprint(b"[]")
    expected = {"/app/counts.json": right}
    assert judge({"/app/counts.json": right}, expected) == (True, [])
    did, diff = judge({"/app/counts.json": wrong}, expected)
    assert not did and "differs" in diff[0]
    assert judge({}, expected)[0] is False
    reformatted = fingerprint(b'[\n  {"count": 5, "word": "THE"}\n]')
    assert judge({"/app/counts.json": reformatted}, expected)[0] is True


# --------------------------------------------------------------------------- static lint rules


@pytest.mark.parametrize(
    ("task", "rule", "file", "line"),
    [
        ("runner_shadowing", "hack-runner-in-writable-cwd", "tests/test.sh", 5),
        ("checker_in_workspace", "hack-checker-on-writable-path", "tests/test.sh", 3),
        ("status_file_trusted", "hack-trusts-status-file", "tests/test.sh", 4),
        ("answer_in_instruction", "hack-output-in-instruction", "instruction.md", 10),
    ],
)
def test_hack_prone_patterns_are_lint_warnings_with_their_line(task, rule, file, line):
    found = [f for f in hack_findings(HACKS / task) if f["rule"] == rule]
    assert found, hack_findings(HACKS / task)
    assert (found[0]["file"], found[0]["line"], found[0]["severity"]) == (file, line, "warning")
    report = lint_task(HACKS / task)
    assert report.ok, report.summary()  # warnings only: anti_cheat proves the weakness
    assert any(f.rule == rule for f in report.warnings)


def test_the_seed_pool_and_the_good_task_raise_no_hack_warning():
    for task in [*seed_tasks(), FIXTURES / "good_task"]:
        assert hack_findings(task) == [], task.name
    assert SEED_DIR.is_dir()
