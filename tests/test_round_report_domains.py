"""The round report counts proposals, admissions and solve rates per domain: the real metrics and
report code over a real SQLite rollout store and a real pool seeded from tasks/seed, the numbers
cross-checked against what the store and the seeds' own tags say."""

from __future__ import annotations

import shutil
from pathlib import Path

from autoenvscaling.tools.report.metrics import CandidateRecord, round_metrics
from autoenvscaling.tools.report.run_report import round_markdown
from autoenvscaling.tools.rollouts.models import Attempt
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.tasks.domains import DOMAINS, folder_domain
from autoenvscaling.tools.tasks.pool import Pool

from .conftest import SEED_DIR

RUN = "run-domains"
# (task, outcome, reward, purpose, round): refresh attempts count, held-out and errors do not.
SOLVER = [
    ("matmul-blocked-c", "solved", 1.0, "refresh", 1),
    ("matmul-blocked-c", "failed", 0.0, "refresh", 1),
    ("rolling-stats-python", "solved", 1.0, "refresh", 0),  # the baseline counts in round 1
    ("histogram-edges-c", "error", None, "refresh", 1),  # infrastructure: no reward, left out
    ("blur-separable-c", "solved", 1.0, "heldout", 1),  # not the pool's
    ("logrotate-script", "failed", 0.25, "refresh", 1),
    ("logrotate-script", "solved", 1.0, "refresh", 1),
    ("c-numstat-fix", "failed", 0.0, "refresh", 1),
    ("git-bisect-regression", "solved", 1.0, "refresh", 2),  # another round
]


def _store(path: Path) -> None:
    with RolloutStore(path) as store:
        for i, (task, outcome, reward, purpose, round_) in enumerate(SOLVER):
            store.record_attempt(
                Attempt(
                    id=f"s{i}",
                    run_id=RUN,
                    round=round_,
                    role="solver",
                    task_id=task,
                    outcome=outcome,
                    reward=reward,
                    metadata={"purpose": purpose},
                )
            )


def _candidates(root: Path) -> list[CandidateRecord]:
    """A kernels task read from its folder (a record from before domains), one the record names,
    and a proposal that never wrote a task.toml."""
    kernel = root / "c0"
    shutil.copytree(SEED_DIR / "histogram-edges-c", kernel)
    empty = root / "c2"
    empty.mkdir()
    common = {"round": 1, "revision": 0, "stage": None}
    return [
        CandidateRecord(slot=0, path=str(kernel), task_id="r01-c0", admitted=True, **common),
        CandidateRecord(
            slot=1, path=str(root / "c1"), task_id="r01-c1", domain="kernels", **common
        ),
        CandidateRecord(
            slot=2, path=str(empty), task_id="r01-c2", domain="professional-work", **common
        ),
        CandidateRecord(slot=3, path=str(empty), task_id="r01-c3", **common),
    ]


def test_round_report_counts_per_domain(tmp_path: Path):
    pool = Pool(tmp_path / "pool")
    seeded = pool.seed_from(SEED_DIR)
    pool.retire("c-numstat-fix", 1, "too easy")
    _store(tmp_path / "rollouts.db")
    records = _candidates(tmp_path)
    m = round_metrics(1, records, tmp_path / "rollouts.db", pool, RUN)
    assert list(m.domains) == list(DOMAINS)
    kernels, software = m.domains["kernels"], m.domains["software"]
    assert (kernels.proposals, kernels.admitted) == (2, 1)
    assert (m.domains["professional-work"].proposals, m.domains["professional-work"].admitted) == (
        1,
        0,
    )
    assert (software.proposals, software.admitted) == (1, 0)  # no task.toml, no aim: software
    assert m.domains["computer-use"].proposals == 0
    assert sum(d.proposals for d in m.domains.values()) == m.candidates == len(records)
    assert sum(d.admitted for d in m.domains.values()) == m.admitted
    # kernels: matmul solved and failed, the baseline's rolling-stats solved (the error and the
    # held-out attempt are not the pool's scored attempts)
    assert (kernels.solver_attempts, kernels.solved) == (3, 2)
    assert kernels.solve_rate == 2 / 3 and kernels.solver_mean_reward == 2 / 3
    # software: logrotate 0.25 and 1.0, numstat 0.0 (retired since, still attempted this round)
    assert (software.solver_attempts, software.solved, software.solve_rate) == (3, 1, 1 / 3)
    assert software.solver_mean_reward == (0.25 + 1.0 + 0.0) / 3
    assert sum(d.solver_attempts for d in m.domains.values()) == m.solver_attempts
    assert m.domains["computer-use"].solve_rate is None
    # the pool's active tasks per domain, against the seeds' own tags
    by_tags = {d: 0 for d in DOMAINS}
    for entry in pool.entries("active"):
        by_tags[folder_domain(SEED_DIR / entry.task_id) or "software"] += 1
    assert {d: c.pool_active for d, c in m.domains.items()} == by_tags
    assert sum(by_tags.values()) == seeded - 1 and by_tags["kernels"] >= 4

    text = round_markdown(m)
    assert "## Per domain" in text
    assert "| kernels | 2 | 1 | 3 | 2 | 0.667 | 0.667 |" in text
    # no proposal or attempt, but the pool's computer-use seeds: counts 0, rates missing
    cu = by_tags["computer-use"]
    assert f"| computer-use | 0 | 0 | 0 | 0 | - | - | {cu} |" in text
    # metrics.json round-trips the counts (the run report and the viewer read it back)
    again = type(m).model_validate_json(m.model_dump_json())
    assert again.domains == m.domains
