"""Harbor task folders: the format, hard limits, the Dockerfile reader, snapshots, the pool, similarity."""
