"""The rollout store (SQLite): the models, the schema and its migrations, the derived columns, transcripts."""
