"""Stored name only: checkpoints written before the graphs had packages name the flywheel's state
models by this module (`checkpoint_serde` allows both). The models live in graphs/flywheel/state.py."""

from .flywheel.state import AdmitItem, FlywheelInput, FlywheelState, SlotTask, TrainingSummary

__all__ = ["AdmitItem", "FlywheelInput", "FlywheelState", "SlotTask", "TrainingSummary"]
