"""Honest work is never lost in silence on its way to the separate verifier.

The agent's work (`artifacts = ["/app"]`) is copied out of its container and into a fresh one.
A venv leaves absolute symlinks; a cache can be large. Before this test's fix one absolute link
or more than `max_download_mb` (512 MB) anywhere under /app dropped the whole of /app: the
verifier found nothing and the trial scored 0 with no error. Now the link and the file that does
not fit are skipped and named (in the trial outcome and, for the tests, in
/logs/verifier/work-copy-skipped.txt); everything else arrives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security.conftest import BACKEND, build_image, describe, run_all, write_task
from tests.security.test_forgery import CHECK_PY, DOCKERFILE, TEST_SH

pytestmark = [pytest.mark.timeout(600)]

HONEST_WITH_DEBRIS = """\
    #!/bin/bash
    awk '{s += $1} END {print s}' /app/numbers.txt > /app/sum.txt
    mkdir -p /app/venv/bin
    ln -s /usr/bin/python3 /app/venv/bin/python
    truncate -s 600M /app/cache.bin
    echo kept > /app/venv/pyvenv.cfg
    """
# The tests also report what they were told was left out.
SKIPPED_TEST_SH = TEST_SH + "    cat /logs/verifier/work-copy-skipped.txt 2>/dev/null\n"


def test_a_link_and_an_oversize_file_are_skipped_and_named(engine_ready, tmp_path):
    image = build_image("forgery", DOCKERFILE)
    task = write_task(
        tmp_path,
        "work-with-debris",
        solve=HONEST_WITH_DEBRIS,
        test_sh=SKIPPED_TEST_SH,
        tests={"check.py": CHECK_PY},
        image=image,
        instruction="Write the sum of the integers in /app/numbers.txt to /app/sum.txt.\n",
    )
    outcome = run_all({"debris": (task, BACKEND)}, tmp_path / "trials")["debris"]
    assert (outcome.reward, outcome.error) == (1.0, None), describe(outcome)
    skipped = outcome.work_skipped
    assert any(s.startswith("/app/venv/bin/python") and "link" in s for s in skipped), skipped
    assert any(s.startswith("/app/cache.bin") for s in skipped), skipped
    # The verifier's view: the tests were told what was left out.
    assert "/app/cache.bin" in outcome.verifier_output, describe(outcome)
    # Everything else arrived (the small file next to the link).
    trial = Path(outcome.trial_dir or "")
    assert (trial / "artifacts" / "app" / "venv" / "pyvenv.cfg").read_text() == "kept\n"
