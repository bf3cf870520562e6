"""Degradation limits on each engine: capped, streamed downloads and the writable-layer cap."""

import resource

import pytest

from autoenvscaling.tools.sandbox import SandboxLimits
from autoenvscaling.tools.sandbox.archives import DownloadTooLargeError
from autoenvscaling.tools.sandbox.container import start_workspace
from autoenvscaling.tools.settings import get_settings

from .conftest import container_running


@pytest.fixture
def small_download_cap(monkeypatch):
    monkeypatch.setenv("AUTOENVSCALING_MAX_DOWNLOAD_MB", "32")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.timeout(120)
async def test_a_sparse_2gb_log_is_refused_without_growing_the_host(
    eworkspace, small_download_cap, tmp_path
):
    """The file past the cap is skipped and named (a folder's copy degrades: the rest arrives);
    asked for alone, it is refused; nothing of it is held in memory or half-written."""
    await eworkspace.exec("mkdir -p /logs/agent && truncate -s 2G /logs/agent/huge.log")
    await eworkspace.exec("echo kept > /logs/agent/a.txt")
    await eworkspace.exec("echo fine > /logs/small.txt")
    before = peak_rss_mb()
    skipped = await eworkspace.download("/logs/agent", tmp_path / "agent")
    assert skipped and any("huge.log" in s and "cap" in s for s in skipped), skipped
    assert [p.name for p in (tmp_path / "agent").iterdir()] == ["a.txt"]  # nothing half-written
    with pytest.raises(DownloadTooLargeError, match="cap"):
        await eworkspace.download("/logs/agent/huge.log", tmp_path / "huge.log")
    assert not (tmp_path / "huge.log").exists()
    assert peak_rss_mb() - before < 64  # streamed and stopped at the cap
    await eworkspace.download("/logs/small.txt", tmp_path / "small.txt")  # small ones still work
    assert (tmp_path / "small.txt").read_text() == "fine\n"


@pytest.mark.timeout(120)
async def test_the_writable_layer_cap_stops_a_disk_filler(engine):
    """320 MB written into a 64 MB layer: the writes fail at the cap (the layer is a filesystem
    of its own size), the sandbox lives on and reports its disk honestly."""
    box = await start_workspace(backend=engine, limits=SandboxLimits(disk_mb=64))
    try:
        result = await box.exec(
            "for i in $(seq 1 40); do head -c 8M /dev/urandom > /fill.$i || break; done; "
            "du -cm /fill.* | tail -1; df -m / | tail -1",
            timeout_sec=60,
        )
        assert box.ref.handle["layer_cap"].startswith("ext4 of 64 MB"), box.ref.handle
        assert "No space left on device" in result.stderr, result
        written, size = int(result.stdout.split()[0]), int(result.stdout.split()[3])
        assert written <= 64 and size <= 64, result.stdout
        assert container_running(box) and "killed" not in box.ref.handle
    finally:
        await box.close()
