"""What leaves a run: the pool as a Harbor dataset with validity cards, and the rollouts."""

from .pool import ExportedPool, ExportError, export_pool
from .rollouts import RolloutExport, RolloutFilter, export_rollouts
from .validity import CARD_FILE, ValidityCard, read_card

__all__ = [
    "CARD_FILE",
    "ExportError",
    "ExportedPool",
    "RolloutExport",
    "RolloutFilter",
    "ValidityCard",
    "export_pool",
    "export_rollouts",
    "read_card",
]
