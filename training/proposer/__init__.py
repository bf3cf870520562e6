"""Proposer training: the gate's proposer reward as a GRPO signal (the plan and backend) and its worker process."""
