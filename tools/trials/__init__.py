"""Harbor trials on our sandboxes: running them, the verifier modes, a model-free script agent."""
