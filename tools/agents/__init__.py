"""What a model is shown: the solver's interface (prompt, tools, results), the proposer's brief, prompt fitting."""
