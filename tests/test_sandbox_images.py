"""Building task images on each engine: content-hashed cache, labels, errors, garbage collection."""

import uuid
from pathlib import Path

import pytest

from autoenvscaling.tools.sandbox import BuildError, profile
from autoenvscaling.tools.sandbox.bases import base_image_tag
from autoenvscaling.tools.sandbox.cleanup import LABEL, TASK_LABEL
from autoenvscaling.tools.sandbox.image_gc import list_images
from autoenvscaling.tools.sandbox.images import build_image, gc_images, remove_task_image
from autoenvscaling.tools.settings import get_settings


def short(name: str) -> str:
    """An image name as docker writes it (podman qualifies short names)."""
    for prefix in ("localhost/", "docker.io/library/", "docker.io/"):
        name = name.removeprefix(prefix)
    return name


def make_task(root: Path, dockerfile: str, files: dict[str, str] | None = None) -> Path:
    task = root / f"t-{uuid.uuid4().hex[:8]}"
    env = task / "environment"
    env.mkdir(parents=True)
    (env / "Dockerfile").write_text(dockerfile)
    for name, text in (files or {}).items():
        (env / name).write_text(text)
    return task


async def test_build_is_cached_by_content_and_labelled(engine, engine_client, tmp_path):
    task = make_task(
        tmp_path,
        "FROM debian:bookworm-slim\nCOPY a.txt /a.txt\nRUN cat /a.txt > /b.txt\n",
        {"a.txt": "one"},
    )
    first = await build_image(task / "environment", backend=engine)
    again = await build_image(task / "environment", backend=engine)
    assert first.built and not again.built and first.tag == again.tag
    assert first.tag.startswith(f"autoenvscaling/{task.name}:")
    labels = engine_client.api.inspect_image(first.tag)["Config"]["Labels"]
    assert labels[LABEL] == "1" and labels[TASK_LABEL] == task.name
    (task / "environment" / "a.txt").write_text("two")
    changed = await build_image(task / "environment", backend=engine)
    assert changed.built and changed.tag != first.tag
    await build_image(
        task / "environment", backend=engine, force=True
    )  # a forced rebuild works too
    for tag in (first.tag, changed.tag):
        engine_client.api.remove_image(tag)


async def test_failed_run_step_is_a_build_error_with_the_log(engine, engine_client, tmp_path):
    task = make_task(tmp_path, "FROM debian:bookworm-slim\nRUN echo about-to-fail && exit 3\n")
    with pytest.raises(BuildError) as error:
        await build_image(task / "environment", backend=engine)
    assert "about-to-fail" in str(error.value) and "3" in str(error.value)


async def test_missing_base_says_how_to_import_it(engine, engine_client, tmp_path):
    task = make_task(tmp_path, "FROM no-such-registry-image/nothing:1\nRUN true\n")
    with pytest.raises(BuildError, match="make bases"):
        await build_image(task / "environment", backend=engine)


async def test_docker_image_without_dockerfile_is_used_as_is(engine, engine_client, tmp_path):
    env = tmp_path / "task" / "environment"
    env.mkdir(parents=True)
    image = await build_image(env, backend=engine, docker_image="debian:bookworm-slim")
    assert image.tag == "debian:bookworm-slim" and not image.built
    with pytest.raises(BuildError, match="could not be pulled"):
        await build_image(env, backend=engine, docker_image="no-such-registry-image/nothing:1")


async def test_gc_removes_rejected_images_and_nothing_it_did_not_build(
    engine, engine_client, tmp_path
):
    """gc removes this run's images but those kept, and never one it did not build: not another
    run's (other test processes build while it lists: seen removing one under a running test),
    not someone else's built FROM ours."""
    import subprocess
    import sys

    api = engine_client.api
    admitted = await build_image(
        make_task(tmp_path, "FROM debian:bookworm-slim\nRUN echo a > /a\n") / "environment",
        backend=engine,
    )
    rejected = await build_image(
        make_task(tmp_path, f"FROM debian:bookworm-slim\nRUN echo {uuid.uuid4().hex} > /r\n")
        / "environment",
        backend=engine,
    )
    other_run = make_task(tmp_path, f"FROM debian:bookworm-slim\nRUN echo {uuid.uuid4().hex}\n")
    other_tag = subprocess.run(
        [sys.executable, "-c", BUILD_IN_A_CHILD, engine, str(other_run / "environment")],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    ).stdout.strip()
    # Someone else's image built FROM ours inherits our label, but not our name: never ours.
    theirs = make_task(tmp_path, f"FROM {admitted.tag}\nRUN echo mine > /mine\n")
    foreign = f"someone-else/app:{uuid.uuid4().hex[:6]}"
    list(api.build(path=str(theirs / "environment"), tag=foreign, network_mode="none", rm=True))
    try:
        report = gc_images({admitted.tag}, backend=engine)
        assert rejected.tag in report.images, report
        assert not {admitted.tag, other_tag} & set(report.images), report
        present = {short(t) for i in list_images(api) for t in i["RepoTags"] or []}
        assert {admitted.tag, other_tag, foreign, base_image_tag()} <= present
        assert rejected.tag not in present
    finally:
        for tag in (foreign, admitted.tag, other_tag):
            api.remove_image(tag)


# Builds two task images in a process of its own, which then exits: their owner is dead.
BUILD_IN_A_CHILD = """
import asyncio, sys
from autoenvscaling.tools.sandbox.images import build_image
async def main():
    for folder in sys.argv[2:]:
        print((await build_image(folder, backend=sys.argv[1])).tag)
asyncio.run(main())
"""


@pytest.mark.timeout(300)
async def test_images_of_an_exited_process_whose_folder_is_gone_are_swept(
    engine, engine_client, tmp_path
):
    """A deleted run folder (or a test's temporary one) leaves its task images behind: podman's
    image listing then slows with every run (seen: 750 images, 45 s a listing, a CI run's
    listing past its 60 s bound). The sweep removes exactly those of an exited builder whose
    folder is gone, and none a live process uses, built by another process or not."""
    import shutil
    import subprocess
    import sys

    from autoenvscaling.tools.sandbox.image_gc import sweep_stale_images

    api = engine_client.api
    gone = make_task(tmp_path, f"FROM debian:bookworm-slim\nRUN echo {uuid.uuid4().hex} > /g\n")
    kept = make_task(tmp_path, f"FROM debian:bookworm-slim\nRUN echo {uuid.uuid4().hex} > /k\n")
    # The same task in two folders: one image (tags are content hashes), built by the child.
    dockerfile = f"FROM debian:bookworm-slim\nRUN echo {uuid.uuid4().hex} > /s\n"
    shared = make_task(tmp_path / "first", dockerfile)
    reused = make_task(tmp_path / "second", dockerfile)
    reused.rename(reused.parent / shared.name)
    reused = reused.parent / shared.name
    child = subprocess.run(
        [sys.executable, "-c", BUILD_IN_A_CHILD, engine]
        + [str(t / "environment") for t in (gone, kept, shared)],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    gone_tag, kept_tag, shared_tag = child.stdout.split()
    # This live process's image of a folder that is gone: its owner may still use it.
    live = make_task(tmp_path, f"FROM debian:bookworm-slim\nRUN echo {uuid.uuid4().hex} > /l\n")
    live_tag = (await build_image(live / "environment", backend=engine)).tag
    # The exited child's image, reused from another folder by this live process.
    reuse = await build_image(reused / "environment", backend=engine)
    assert reuse.tag == shared_tag and not reuse.built
    assert api.inspect_image(kept_tag)["Config"]["Labels"]["autoenvscaling.folder"] == str(kept)
    for folder in (gone, live, shared):
        shutil.rmtree(folder)
    try:
        report = sweep_stale_images(engine)
        # Every process sweeps: another test process's sweep may have removed it first.
        assert gone_tag in report.images or not _present(api, gone_tag), report
        assert not {kept_tag, live_tag, shared_tag} & set(report.images), report
        assert f"{shared_tag}: used by a live process" in [
            k.removeprefix("localhost/") for k in report.kept
        ]
        present = {short(t) for i in list_images(api) for t in i["RepoTags"] or []}
        assert gone_tag not in present
        assert {kept_tag, live_tag, shared_tag, base_image_tag()} <= present
    finally:
        for tag in (kept_tag, live_tag, shared_tag):
            api.remove_image(tag)


async def test_a_dockerfile_cannot_forge_the_labels_the_sweep_reads(
    engine, engine_client, tmp_path
):
    """Attack: a proposer's Dockerfile sets our labels itself, to pin its image to a live process
    (PID 1, whose start time and the host's boot id a build step can read) and a folder that
    always exists, so no sweep ever removes it (the store grows until listings time out), or to
    point at another task's folder. The labels the engine records are ours, whatever it wrote."""
    from autoenvscaling.tools.sandbox.cleanup import FOLDER_LABEL, OWNER_LABEL, RUN_ID, RUN_LABEL
    from autoenvscaling.tools.sandbox.cleanup import owner as this_process

    task = make_task(
        tmp_path,
        "FROM debian:bookworm-slim\n"
        f'LABEL {OWNER_LABEL}="forged:1:1" {FOLDER_LABEL}="/" {RUN_LABEL}="forged"\n'
        f"RUN echo {uuid.uuid4().hex} > /f\n"
        f'LABEL {FOLDER_LABEL}="/usr" {OWNER_LABEL}="forged:1:2"\n',
    )
    image = await build_image(task / "environment", backend=engine)
    try:
        labels = engine_client.api.inspect_image(image.tag)["Config"]["Labels"]
        assert labels[OWNER_LABEL] == this_process()
        assert labels[FOLDER_LABEL] == str(task)
        assert labels[RUN_LABEL] == RUN_ID
    finally:
        remove_task_image(task, backend=engine)


def _present(api, tag: str) -> bool:
    return tag in {short(t) for i in list_images(api) for t in i["RepoTags"] or []}


def test_staleness_is_judged_by_owner_folder_and_name(tmp_path):
    from autoenvscaling.tools.sandbox.cleanup import FOLDER_LABEL, OWNER_LABEL, owner
    from autoenvscaling.tools.sandbox.image_gc import is_stale

    (tmp_path / "here" / "environment").mkdir(parents=True)
    dead = "no-such-boot:1:1"  # an earlier boot: exited

    def image(tag: str, who: str, folder: str | None) -> dict:
        labels = {LABEL: "1", OWNER_LABEL: who} | ({FOLDER_LABEL: folder} if folder else {})
        return {"Id": "sha256:x", "RepoTags": [tag], "Labels": labels}

    gone = str(tmp_path / "gone")
    assert is_stale(image("autoenvscaling/t:1", dead, gone), "podman")
    assert is_stale(image("localhost/autoenvscaling/t:1", dead, None), "podman")  # unrecorded
    assert not is_stale(image("autoenvscaling/t:1", dead, str(tmp_path / "here")), "podman")
    assert not is_stale(image("autoenvscaling/t:1", owner(), gone), "podman")  # alive
    assert not is_stale(image("someone-else/app:1", dead, gone), "podman")  # not our name
    assert not is_stale(image("autoenvscaling/base:1", dead, gone), "podman")
    # A docker daemon may serve other machines: an owner it cannot place is kept.
    assert not is_stale(image("autoenvscaling/t:1", dead, gone), "docker")


async def test_remove_task_image_of_a_rejected_candidate(engine, engine_client, tmp_path):
    task = make_task(tmp_path, "FROM debian:bookworm-slim\nRUN echo c > /c\n")
    await build_image(task / "environment", backend=engine)
    assert remove_task_image(task, backend=engine) is True
    assert remove_task_image(task, backend=engine) is False


async def test_a_rejected_candidate_keeps_an_image_another_run_built(
    engine, engine_client, tmp_path, monkeypatch
):
    """Tags are content hashes: another run may have built the same image and still need it."""
    from autoenvscaling.tools.sandbox import cleanup

    task = make_task(tmp_path, "FROM debian:bookworm-slim\nRUN echo other-run > /o\n")
    image = await build_image(task / "environment", backend=engine)
    try:
        monkeypatch.setattr(cleanup, "RUN_ID", "another-run")
        assert remove_task_image(task, backend=engine) is False
        assert engine_client.api.inspect_image(image.tag)["Id"] == image.id
        monkeypatch.undo()
        assert remove_task_image(task, backend=engine) is True
    finally:
        remove_task_image(task, backend=engine)


async def test_build_steps_run_with_no_network_clean_env_and_the_profile(
    engine, tmp_path, monkeypatch
):
    monkeypatch.setenv("AES_HOST_ONLY_SECRET", "do-not-leak")
    task = make_task(
        tmp_path,
        "FROM debian:bookworm-slim\n"
        "RUN grep -E '^(CapEff|Seccomp):' /proc/self/status; "
        "echo ifaces $(tail -n +3 /proc/net/dev | cut -d: -f1); "
        "echo secret=${AES_HOST_ONLY_SECRET:-none}; "
        "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); "
        'print("keyctl", l.syscall(250, 0, 0, 0, 0, 0), ctypes.get_errno())\'\n',
    )
    lines: list[str] = []
    image = await build_image(task / "environment", backend=engine, log=lines.append, force=True)
    text = "\n".join(lines)
    assert "ifaces lo" in text and "secret=none" in text, text
    assert "Seccomp:\t2" in text, text
    if engine == "podman":  # docker's build API takes no capability or seccomp options
        caps = int(next(ln for ln in lines if ln.startswith("CapEff")).split()[-1], 16)
        assert caps == sum(1 << bit for bit in profile.CAP_BITS.values()), text
        assert "keyctl -1 1" in text, text
    remove_task_image(task, backend=engine)
    assert image.built


# A podman that fails the first build with the error podman gives when another process removes
# an image during its layer-cache lookup (seen with parallel test workers and a gc), then is the
# real podman. Every build call is logged, and every real race (`race`).
RACING_PODMAN = """#!/bin/sh
if [ "$1" = build ]; then
  echo build >> {log}
  if [ ! -e {raced} ]; then
    : > {raced}
    echo "STEP 1/2: FROM debian:bookworm-slim"
    echo "Error: checking if cached image exists from a previous build: getting top layer info: layer not known"
    exit 125
  fi
  # The real build; a race it really met (another test process removing an image meanwhile:
  # podman's own last line says so) is logged, so the counts below allow exactly those.
  /usr/bin/podman "$@" > {log}.out.$$ 2>&1
  code=$?
  cat {log}.out.$$
  if grep -v '^[[:space:]]*$' {log}.out.$$ | tail -n 1 | grep -q '^Error: checking if cached image exists'; then
    echo race >> {log}
  fi
  exit $code
fi
exec /usr/bin/podman "$@"
"""


def builds_but_real_races(log: Path) -> int:
    """Build calls the fake podman logged, less those podman really lost to a race."""
    text = log.read_text()
    return text.count("build") - text.count("race")


@pytest.mark.timeout(180)
async def test_a_build_that_meets_a_removed_layer_is_tried_again(
    engine_ready, tmp_path, monkeypatch, request
):
    from autoenvscaling.tools.sandbox import engine

    log, raced, fake = tmp_path / "builds.log", tmp_path / "raced", tmp_path / "podman"
    fake.write_text(RACING_PODMAN.format(log=log, raced=raced))
    fake.chmod(0o755)
    monkeypatch.setattr(engine, "PODMAN", str(fake))
    # The fake podman writes its log here: outside the read-only build namespace (buildjail.py).
    monkeypatch.setenv("AUTOENVSCALING_BUILD_JAIL", "false")
    get_settings.cache_clear()
    request.addfinalizer(get_settings.cache_clear)

    image = await build_image(
        make_task(tmp_path, f"FROM debian:bookworm-slim\nRUN echo {uuid.uuid4().hex} > /r\n")
        / "environment",
        backend="podman",
    )
    assert image.built and raced.exists()
    assert builds_but_real_races(log) == 2

    # Any other failure is the Dockerfile's own: reported at once, never tried again.
    log.unlink()
    with pytest.raises(BuildError, match="exit"):
        await build_image(
            make_task(tmp_path, "FROM debian:bookworm-slim\nRUN exit 3\n") / "environment",
            backend="podman",
        )
    assert builds_but_real_races(log) == 1

    # Attack: a RUN that prints podman's race message, then fails, would buy itself three builds
    # if any line counted. Only podman's own last line does: built once.
    log.unlink()
    with pytest.raises(BuildError, match="exit"):
        await build_image(
            make_task(
                tmp_path,
                "FROM debian:bookworm-slim\nRUN echo 'Error: checking if cached image exists "
                "from a previous build: getting top layer info: layer not known'; exit 1\n",
            )
            / "environment",
            backend="podman",
        )
    assert builds_but_real_races(log) == 1


def test_an_image_lookup_that_meets_a_removed_image_is_asked_again(engine_ready):
    import requests
    from docker.errors import APIError, ImageNotFound

    from autoenvscaling.tools.sandbox.engine import client, inspect_image

    api = client(engine_ready).api
    calls: list[str] = []

    class RacingEngine:
        """The real engine, whose first answer is podman's 500 when another image vanishes
        during the lookup (seen with parallel test workers)."""

        def inspect_image(self, name: str):
            calls.append(name)
            if len(calls) == 1:
                response = requests.Response()
                response.status_code = 500
                raise APIError(
                    "500 Server Error",
                    response=response,
                    explanation=f"failed to convert ImageData to ImageInspect '{name}': reading "
                    'image "515d1fd4": locating image with ID "515d1fd4": image not known',
                )
            return api.inspect_image(name)

    base = base_image_tag()
    assert inspect_image(RacingEngine(), base)["Id"] == api.inspect_image(base)["Id"]
    assert len(calls) == 2
    # A missing image is an answer, not a race: asked once.
    calls.clear()
    with pytest.raises(ImageNotFound):
        inspect_image(RacingEngine(), f"autoenvscaling/missing-{uuid.uuid4().hex[:8]}:none")
    assert len(calls) == 1 + 1  # the injected 500, then the engine's own 404
