"""The daemonless Dockerfile subset: parsing, errors that name the line, cached layers."""

from pathlib import Path

import pytest

from autoenvscaling.tools.sandbox import BuildError
from autoenvscaling.tools.sandbox.bwrap import BwrapSandbox, build_image
from autoenvscaling.tools.sandbox.dockerfile import parse_dockerfile
from autoenvscaling.tools.sandbox.rootfs import map_base_image


def _env(tmp_path: Path, dockerfile: str, files: dict[str, str] | None = None) -> Path:
    env = tmp_path / "environment"
    env.mkdir(exist_ok=True)
    (env / "Dockerfile").write_text(dockerfile)
    for name, text in (files or {}).items():
        (env / name).parent.mkdir(parents=True, exist_ok=True)
        (env / name).write_text(text)
    return env


def test_plan_tracks_env_workdir_args_and_copy(tmp_path):
    env = _env(
        tmp_path,
        'ARG BASE=debian:bookworm-slim\nFROM $BASE\n# a comment\nARG N=3\nENV A=1 B="two words"\n'
        "WORKDIR /app\nCOPY data/ ./data/\nRUN echo $N\nUSER 1000\nEXPOSE 80\n",
        {"data/x.txt": "x"},
    )
    plan = parse_dockerfile(env / "Dockerfile")
    assert plan.base_image == "debian:bookworm-slim"
    assert (
        plan.env == {"A": "1", "B": "two words"} and plan.workdir == "/app" and plan.user == "1000"
    )
    copy = next(s for s in plan.steps if s.kind == "COPY")
    assert copy.sources == ["data/"] and copy.dest == "/app/data/"
    assert any("EXPOSE" in note for note in plan.notes)


@pytest.mark.parametrize(
    "dockerfile, needle",
    [
        ("FROM debian:bookworm\nHEALTHCHEK CMD true\n", "line 2 (HEALTHCHEK)"),
        ("FROM debian:bookworm AS a\nFROM debian:bookworm\n", "multi-stage"),
        ("FROM debian:bookworm\nCOPY --from=a /x /y\n", "--from"),
        ("FROM debian:bookworm\nADD https://example.invalid/x.tgz /x\n", "no network"),
        ("FROM debian:bookworm\nCOPY missing.txt /x\n", "missing.txt not found"),
        ("FROM debian:bookworm\nCOPY ../secret /x\n", "outside the build context"),
        ("RUN true\n", "first instruction must be FROM"),
        ("FROM debian:bookworm\nONBUILD RUN true\n", "ONBUILD"),
    ],
)
def test_bad_dockerfiles_name_the_line_and_the_fix(tmp_path, dockerfile, needle):
    env = _env(tmp_path, dockerfile)
    with pytest.raises(BuildError) as info:
        parse_dockerfile(env / "Dockerfile")
    assert needle in str(info.value)


def test_unknown_base_image_is_refused_with_the_supported_list():
    with pytest.raises(BuildError, match="supported: debian"):
        map_base_image("alpine:3.20")


async def test_build_runs_steps_caches_the_layer_and_records_approximation(bwrap_ready, tmp_path):
    env = _env(
        tmp_path,
        "FROM python:3.12-slim\nWORKDIR /app\nCOPY in.txt ./\n"
        "RUN wc -c < in.txt > size.txt && rm in.txt\nENV MODE=test\n",
        {"in.txt": f"{tmp_path.name}\n"},
    )  # unique content: never an old cached layer
    notes: list[str] = []
    first = await build_image(env, log=notes.append)
    assert any("approximated" in n for n in notes)  # python:3.12 runs on the Debian base
    built = (first.layers[-1].parent / "image.json").stat().st_mtime_ns
    again = await build_image(env)
    assert again.layers == first.layers  # a cache hit: the same layer, not rebuilt
    assert (again.layers[-1].parent / "image.json").stat().st_mtime_ns == built
    sandbox = await BwrapSandbox.start(first, workdir=first.workdir, env=first.env)
    try:
        result = await sandbox.exec("cat size.txt; ls; echo $MODE")
        assert result.stdout.split() == [str(len(tmp_path.name) + 1), "size.txt", "test"]
    finally:
        await sandbox.close()


async def test_failing_run_step_reports_line_and_output(bwrap_ready, tmp_path):
    env = _env(
        tmp_path,
        f"FROM debian:bookworm-slim\nRUN echo {tmp_path.name}\nRUN echo boom-output && exit 3\n",
    )
    with pytest.raises(BuildError) as info:
        await build_image(env)
    assert "line 3" in str(info.value) and "code 3" in str(info.value)
    assert "boom-output" in str(info.value)
