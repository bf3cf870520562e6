"""The rollout store (SQLite, or PostgreSQL by URL): the models, the schema and its migrations, the derived columns, transcripts."""
