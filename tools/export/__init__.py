"""What leaves a run: the pool as a Harbor dataset with validity cards, and the rollouts."""

from autoenvscaling.tools.export.pool import ExportedPool, ExportError, export_pool
from autoenvscaling.tools.export.rollouts import RolloutExport, RolloutFilter, export_rollouts
from autoenvscaling.tools.export.validity import CARD_FILE, ValidityCard, read_card

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
