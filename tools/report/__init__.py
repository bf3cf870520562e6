"""Reports of a run: per-round metrics, how each role behaved, the report files and their links."""
