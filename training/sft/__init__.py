"""Supervised fine-tuning: verified trajectories as SFT data, the TRL SFT backend and its worker, the cold-start warm-up."""
