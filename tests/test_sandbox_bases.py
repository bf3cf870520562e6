"""`make bases` after the base's recipe changed (issue 30 added the office packages): a FROM tag
that still names an older base this project imported moves to the new base, and a tag that names
someone else's image is left alone. Real podman, throwaway tags."""

from __future__ import annotations

import io
import subprocess
import tarfile
import uuid

from autoenvscaling.tools.sandbox.bases import base_image_tag, base_rootfs_path, ensure_base_image
from autoenvscaling.tools.sandbox.cleanup import BASE_LABEL
from autoenvscaling.tools.sandbox.engine import cli_argv, client
from autoenvscaling.tools.sandbox.image_tags import image_id


def _tiny_image(tag: str, *, ours: bool) -> str:
    """A one-file image; `ours` gives it the label every imported base carries."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("marker")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"x\n"))
    argv, env = cli_argv("podman")
    changes = ["--change", f"LABEL {BASE_LABEL}=bookworm-older"] if ours else []
    done = subprocess.run(
        [*argv, "import", *changes, "-", tag], input=data.getvalue(), capture_output=True, env=env
    )
    assert done.returncode == 0, done.stderr.decode()[-500:]
    found = image_id(client("podman").api, tag)
    assert found is not None
    return found


def test_an_older_base_is_retagged_and_a_foreign_image_left_alone(engine_ready: str) -> None:
    api = client("podman").api
    run = uuid.uuid4().hex[:8]
    older, foreign = f"localhost/aes-test-{run}/older:slim", f"localhost/aes-test-{run}/other:slim"
    fakes = [_tiny_image(older, ours=True), _tiny_image(foreign, ours=False)]
    ready = base_rootfs_path().parent / f"{base_rootfs_path().name}.ready"
    before = ready.stat().st_mtime
    try:
        done = ensure_base_image((older, foreign), backend="podman")
        base = image_id(api, base_image_tag())
        assert older in done and image_id(api, older) == base
        assert foreign not in done and image_id(api, foreign) == fakes[1] != base
        assert ready.stat().st_mtime == before  # the base was found, not rebuilt
    finally:
        for tag in (older, foreign):
            if image_id(api, tag) is not None:
                api.remove_image(tag)
        for fake in fakes:
            if image_id(api, fake) is not None:
                api.remove_image(fake, force=True)
