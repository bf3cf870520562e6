"""`autoenvscaling doctor`: which engine works here, why not the other, which disk cap applies."""

import json

import pytest
from typer.testing import CliRunner

from autoenvscaling.cli.main import app


@pytest.mark.timeout(120)
def test_doctor_says_which_engine_works_and_how_the_disk_is_capped(engine_ready, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/aes-no-docker.sock")
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    status = {s["name"]: s for s in json.loads(result.output)}
    assert status["podman"]["ok"], status["podman"]
    assert "base image" in status["podman"]["detail"]
    assert not status["docker"]["ok"] and "no docker engine answers" in status["docker"]["detail"]
    assert "measured" in status["layer-cap (podman)"]["detail"]


@pytest.mark.timeout(120)
def test_doctor_clean_reports_what_it_swept(engine_ready):
    result = CliRunner().invoke(app, ["doctor", "--clean", "--json"])
    assert result.exit_code == 0, result.output
    assert "podman: removed stale containers" in result.output
