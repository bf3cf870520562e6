"""The rollout store's SQLite schema and its versioned migrations.

The schema version lives in `PRAGMA user_version`. `migrate()` applies every migration newer than
the database's version in one IMMEDIATE transaction, so several processes opening a fresh database
at once end with one schema and no half-applied step. Add a migration by appending to MIGRATIONS;
never edit one that has shipped.
"""

from __future__ import annotations

import sqlite3

# Each entry moves the schema from version i to version i + 1.
MIGRATIONS: list[str] = [
    # v1: attempts, steps, full-text search over tool outputs and attempt errors.
    """
    CREATE TABLE attempts (
        -- An explicit rowid: FTS rows point at it, and VACUUM may renumber an implicit one.
        seq               INTEGER PRIMARY KEY,
        id                TEXT NOT NULL UNIQUE,
        run_id            TEXT NOT NULL DEFAULT '',
        round             INTEGER NOT NULL DEFAULT 0,
        role              TEXT NOT NULL CHECK (role IN ('solver', 'proposer')),
        task_id           TEXT NOT NULL,
        category          TEXT NOT NULL DEFAULT '',
        policy_version    TEXT NOT NULL DEFAULT '',
        reward            REAL,
        -- NULL while the attempt is running.
        outcome           TEXT CHECK (outcome IN ('solved', 'failed', 'timeout', 'error')),
        turns             INTEGER NOT NULL DEFAULT 0,
        prompt_tokens     INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        cost              REAL NOT NULL DEFAULT 0,
        duration_sec      REAL,
        error             TEXT,
        started_at        TEXT NOT NULL,
        finished_at       TEXT,
        metadata          TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX attempts_by_task ON attempts (role, policy_version, task_id, outcome, reward);
    CREATE INDEX attempts_by_category ON attempts (role, policy_version, category, outcome, reward);
    CREATE INDEX attempts_by_outcome ON attempts (role, outcome, seq);
    CREATE INDEX attempts_by_run ON attempts (run_id, round);

    CREATE TABLE steps (
        seq          INTEGER PRIMARY KEY,
        attempt_id   TEXT NOT NULL REFERENCES attempts (id) ON DELETE CASCADE,
        idx          INTEGER NOT NULL,
        message      TEXT,
        tool_name    TEXT,
        tool_args    TEXT,
        tool_output  TEXT,
        output_bytes INTEGER NOT NULL DEFAULT 0,
        exit_code    INTEGER,
        duration_sec REAL,
        UNIQUE (attempt_id, idx)
    );

    CREATE VIRTUAL TABLE steps_fts USING fts5 (
        tool_output, content = 'steps', content_rowid = 'seq'
    );
    CREATE TRIGGER steps_fts_ins AFTER INSERT ON steps BEGIN
        INSERT INTO steps_fts (rowid, tool_output) VALUES (new.seq, new.tool_output);
    END;
    CREATE TRIGGER steps_fts_del AFTER DELETE ON steps BEGIN
        INSERT INTO steps_fts (steps_fts, rowid, tool_output)
        VALUES ('delete', old.seq, old.tool_output);
    END;
    CREATE TRIGGER steps_fts_upd AFTER UPDATE OF tool_output ON steps BEGIN
        INSERT INTO steps_fts (steps_fts, rowid, tool_output)
        VALUES ('delete', old.seq, old.tool_output);
        INSERT INTO steps_fts (rowid, tool_output) VALUES (new.seq, new.tool_output);
    END;

    CREATE VIRTUAL TABLE attempts_fts USING fts5 (
        error, content = 'attempts', content_rowid = 'seq'
    );
    CREATE TRIGGER attempts_fts_ins AFTER INSERT ON attempts BEGIN
        INSERT INTO attempts_fts (rowid, error) VALUES (new.seq, new.error);
    END;
    CREATE TRIGGER attempts_fts_del AFTER DELETE ON attempts BEGIN
        INSERT INTO attempts_fts (attempts_fts, rowid, error) VALUES ('delete', old.seq, old.error);
    END;
    CREATE TRIGGER attempts_fts_upd AFTER UPDATE OF error ON attempts BEGIN
        INSERT INTO attempts_fts (attempts_fts, rowid, error) VALUES ('delete', old.seq, old.error);
        INSERT INTO attempts_fts (rowid, error) VALUES (new.seq, new.error);
    END;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer autoenvscaling; upgrade this install to read it."""


class SchemaOutdatedError(RuntimeError):
    """A read-only open found an old schema; open the store once read-write to migrate it."""


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def check_version(conn: sqlite3.Connection, path: str) -> int:
    version = schema_version(conn)
    if version > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"{path} has rollout schema v{version}, this install knows up to v{SCHEMA_VERSION}: "
            "upgrade autoenvscaling"
        )
    return version


def migrate(conn: sqlite3.Connection, path: str) -> int:
    """Bring the database to SCHEMA_VERSION. Safe to race from several processes."""
    if check_version(conn, path) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Re-read under the write lock: another process may have migrated meanwhile.
        version = check_version(conn, path)
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            for statement in _statements(script):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return SCHEMA_VERSION


def _statements(script: str) -> list[str]:
    """Split a migration into statements (executescript would COMMIT our transaction)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements
