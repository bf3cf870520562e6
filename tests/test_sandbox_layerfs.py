"""The writable layer's own filesystem (layerfs.py): what it refuses and what it cleans up.
(The cap itself is attacked in tests/security/test_caps.py.)"""

import os

import pytest

from autoenvscaling.tools.sandbox import cleanup, layerfs


class Inspect:
    """An engine answering `inspect_container` with the given layer folder."""

    def __init__(self, upper: str | None) -> None:
        self.upper = upper

    def inspect_container(self, _cid: str) -> dict:
        return {"GraphDriver": {"Data": {"UpperDir": self.upper} if self.upper else {}}}


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal below is for a root process")
def test_a_layer_that_is_not_a_local_overlay_folder_is_left_to_measurement(tmp_path):
    (tmp_path / "diff").mkdir()  # an upper dir with no overlay layer folder around it
    for upper in (None, "/nonexistent/diff", str(tmp_path / "diff")):
        with pytest.raises(layerfs.NotConfinedError, match="no local overlay layer"):
            layerfs.confine(Inspect(upper), "c" * 64, 16)
    # Refused before anything was made beside the store (layer folder / .. / ..).
    assert not (tmp_path.parent.parent / layerfs.BACKING_FOLDER).exists()


def test_backing_files_of_dead_processes_are_removed_and_live_ones_kept(tmp_path):
    mine = tmp_path / f"{cleanup.owner()}-abc.img"
    dead = tmp_path / f"{cleanup.owner().rsplit(':', 2)[0]}:999999999:1-def.img"
    other_boot = tmp_path / "00000000-0000-0000-0000-000000000000:1:1-fed.img"
    for path in (mine, dead, other_boot):
        path.write_bytes(b"")
    layerfs._remove_leftovers(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [mine.name]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts need root")
def test_mounts_of_dead_processes_are_detached_and_live_ones_kept(tmp_path):
    """A process that died between `confine` and `release` leaves its layer filesystem mounted
    in our folder: the next `confine` detaches it; a live process's stays."""
    import subprocess

    from tests.conftest import mounted_on

    mine = tmp_path / f"{cleanup.owner()}-abc"
    dead = tmp_path / f"{cleanup.owner().rsplit(':', 2)[0]}:999999999:1-def"
    for folder in (mine, dead):
        folder.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "aes-test", str(folder)], check=True)
    try:
        layerfs._remove_leftovers(tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == [mine.name]
        assert mounted_on(mine) == ["tmpfs"] and not mounted_on(dead)
    finally:
        for folder in (mine, dead):
            subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)
