"""The cold start: both roles start from verified trajectories before round 1 (`start`), built by
replaying reference solutions through the served solver (`solver_replay`) and task authorings
through the served proposer (graphs/proposer/replay.py)."""
