#!/bin/bash
# Reference solution: build the new tables next to the old ones in one transaction,
# transform the rows in Python, drop the legacy tables, rename, verify.
set -euo pipefail
python3 - <<'PY'
import datetime, sqlite3

def parse_date(s):
    s = s.strip()
    if s.isdigit():
        return datetime.datetime.fromtimestamp(int(s), datetime.timezone.utc).date()
    if "/" in s:
        d, m, y = s.split("/")
        return datetime.date(int(y), int(m), int(d))
    return datetime.date.fromisoformat(s[:10])

db = sqlite3.connect("/app/app.db", isolation_level=None)
db.execute("BEGIN")
db.execute("""
CREATE TABLE users_new (
    id INTEGER PRIMARY KEY,
    email TEXT NOT NULL UNIQUE COLLATE NOCASE,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    is_admin INTEGER NOT NULL CHECK (is_admin IN (0, 1))
)
""")
groups = {}
for uid, name, email, created, admin in db.execute("SELECT id, full_name, email, created, is_admin FROM users ORDER BY id"):
    groups.setdefault(email.strip().lower(), []).append((uid, name, created, admin))
owner = {}
for email, rows in groups.items():
    uid, words = rows[0][0], rows[0][1].split()
    db.execute("INSERT INTO users_new VALUES (?,?,?,?,?,?)", (
        uid, email, words[0], " ".join(words[1:]),
        min(parse_date(r[2]) for r in rows).isoformat(),
        int(any(r[3].strip().lower() in ("yes", "1", "true", "y") for r in rows))))
    owner[email] = uid
posts = [(pid, owner[e.strip().lower()], t, b)
         for pid, e, t, b in db.execute("SELECT id, user_email, title, body FROM posts")
         if e.strip().lower() in owner]
db.execute("DROP TABLE posts")
db.execute("DROP TABLE users")
db.execute("ALTER TABLE users_new RENAME TO users")
db.execute("""
CREATE TABLE posts (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    title TEXT NOT NULL,
    body TEXT NOT NULL
)""")
db.execute("CREATE INDEX idx_posts_user_id ON posts(user_id)")
db.executemany("INSERT INTO posts VALUES (?,?,?,?)", posts)
db.execute("COMMIT")
assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
assert not db.execute("PRAGMA foreign_key_check").fetchall()
db.execute("VACUUM")
print(db.execute("SELECT count(*) FROM users").fetchone()[0], "users,",
      db.execute("SELECT count(*) FROM posts").fetchone()[0], "posts")
PY
sqlite3 /app/app.db .schema
