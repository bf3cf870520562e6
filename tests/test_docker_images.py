"""Building task images in a real engine: content-hashed cache, labels, errors, garbage collection."""
# ruff: noqa: F811  (pytest fixtures imported from test_docker_fixtures)

import uuid
from pathlib import Path

import pytest

from autoenvscaling.tools.sandbox import BuildError
from autoenvscaling.tools.sandbox.docker import (
    LABEL,
    TASK_LABEL,
    base_image_tag,
    build_image,
    gc_images,
    remove_task_image,
)

from .test_docker_fixtures import docker_engine  # noqa: F401

pytestmark = pytest.mark.docker


def make_task(root: Path, dockerfile: str, files: dict[str, str] | None = None) -> Path:
    task = root / f"t-{uuid.uuid4().hex[:8]}"
    env = task / "environment"
    env.mkdir(parents=True)
    (env / "Dockerfile").write_text(dockerfile)
    for name, text in (files or {}).items():
        (env / name).write_text(text)
    return task


async def test_build_is_cached_by_content_and_labelled(docker_engine, tmp_path):
    task = make_task(
        tmp_path,
        "FROM debian:bookworm-slim\nCOPY a.txt /a.txt\nRUN cat /a.txt > /b.txt\n",
        {"a.txt": "one"},
    )
    first = await build_image(task / "environment")
    again = await build_image(task / "environment")
    assert first.built and not again.built and first.tag == again.tag
    assert first.tag.startswith(f"autoenvscaling/{task.name}:")
    labels = docker_engine.api.inspect_image(first.tag)["Config"]["Labels"]
    assert labels[LABEL] == "1" and labels[TASK_LABEL] == task.name
    (task / "environment" / "a.txt").write_text("two")
    changed = await build_image(task / "environment")
    assert changed.built and changed.tag != first.tag
    await build_image(task / "environment", force=True)  # a forced rebuild works too
    for tag in (first.tag, changed.tag):
        docker_engine.api.remove_image(tag)


async def test_failed_run_step_is_a_build_error_with_the_log(docker_engine, tmp_path):
    task = make_task(tmp_path, "FROM debian:bookworm-slim\nRUN echo about-to-fail && exit 3\n")
    with pytest.raises(BuildError) as error:
        await build_image(task / "environment")
    assert "about-to-fail" in str(error.value) and "3" in str(error.value)


async def test_missing_base_says_how_to_import_it(docker_engine, tmp_path):
    task = make_task(tmp_path, "FROM no-such-registry-image/nothing:1\nRUN true\n")
    with pytest.raises(BuildError, match="autoenvscaling.tools.sandbox.docker bases"):
        await build_image(task / "environment")


async def test_docker_image_without_dockerfile_is_used_as_is(docker_engine, tmp_path):
    env = tmp_path / "task" / "environment"
    env.mkdir(parents=True)
    image = await build_image(env, docker_image="debian:bookworm-slim")
    assert image.tag == "debian:bookworm-slim" and not image.built
    with pytest.raises(BuildError, match="could not be pulled"):
        await build_image(env, docker_image="no-such-registry-image/nothing:1")


async def test_gc_removes_rejected_images_and_nothing_it_did_not_build(docker_engine, tmp_path):
    api = docker_engine.api
    admitted = await build_image(
        make_task(tmp_path, "FROM debian:bookworm-slim\nRUN echo a > /a\n") / "environment"
    )
    rejected = await build_image(
        make_task(tmp_path, "FROM debian:bookworm-slim\nRUN echo r > /r\n") / "environment"
    )
    # Someone else's image built FROM ours inherits our label, but not our name: never ours.
    theirs = make_task(tmp_path, f"FROM {admitted.tag}\nRUN echo mine > /mine\n")
    foreign = f"someone-else/app:{uuid.uuid4().hex[:6]}"
    list(api.build(path=str(theirs / "environment"), tag=foreign, network_mode="host", rm=True))
    ours_now = {t for i in api.images(filters={"label": f"{LABEL}=1"}) for t in i["RepoTags"] or []}
    keep = (ours_now - {rejected.tag}) | {admitted.tag}
    try:
        report = gc_images(keep)
        assert rejected.tag in report.images and admitted.tag not in report.images
        present = {t for i in api.images() for t in i["RepoTags"] or []}
        assert {admitted.tag, foreign, base_image_tag(), "debian:bookworm-slim"} <= present
        assert rejected.tag not in present
    finally:
        api.remove_image(foreign)
        api.remove_image(admitted.tag)


async def test_remove_task_image_of_a_rejected_candidate(docker_engine, tmp_path):
    task = make_task(tmp_path, "FROM debian:bookworm-slim\nRUN echo c > /c\n")
    await build_image(task / "environment")
    assert remove_task_image(task) is True
    assert remove_task_image(task) is False
