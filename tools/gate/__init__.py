"""The admission gate: the stages a candidate Harbor task must pass before it joins the pool.

Plain async functions over a task folder (`run_stage`, `validate_task`); the LangGraph
validation subgraph (graphs/validation/builder.py) runs the same functions, one node per stage.
"""

from .config import STAGES, GateConfig, StageName
from .pipeline import run_stage, sealed, validate_task
from .results import (
    REWARD_VALIDATION_FAILED,
    StageResult,
    Verdict,
    infrastructure_verdict,
    make_verdict,
)

__all__ = [
    "REWARD_VALIDATION_FAILED",
    "STAGES",
    "GateConfig",
    "StageName",
    "StageResult",
    "Verdict",
    "infrastructure_verdict",
    "make_verdict",
    "run_stage",
    "sealed",
    "validate_task",
]
