"""GRPO for the solver: the TRL backend (parent side), its worker process, one episode's world (a live Harbor task, the terminal tools, the verifier), and the memory bound of the fused LM head."""
