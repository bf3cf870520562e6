"""Compare the migrated /app/app.db with a reference migration of a regenerated legacy DB."""
import datetime
import os
import shutil
import sqlite3
import subprocess
import tempfile

DB = "/app/app.db"
DDL = """
CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE COLLATE NOCASE,
    first_name TEXT NOT NULL, last_name TEXT NOT NULL, created_at TEXT NOT NULL,
    is_admin INTEGER NOT NULL CHECK (is_admin IN (0, 1)));
CREATE TABLE posts (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id),
    title TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX idx_posts_user_id ON posts(user_id);
"""


def parse_date(s):
    s = s.strip()
    if s.isdigit():
        return datetime.datetime.fromtimestamp(int(s), datetime.timezone.utc).date()
    if "/" in s:
        d, m, y = s.split("/")
        return datetime.date(int(y), int(m), int(d))
    return datetime.date.fromisoformat(s[:10])


def reference():
    path = os.path.join(tempfile.mkdtemp(), "legacy.db")
    subprocess.run(["python3", "/tests/gen_legacy.py", path], check=True)
    db = sqlite3.connect(path)
    groups = {}
    for uid, name, email, created, admin in db.execute("SELECT * FROM users ORDER BY id"):
        groups.setdefault(email.strip().lower(), []).append((uid, name, created, admin))
    users, by_email = {}, {}
    for email, rows in groups.items():
        uid, name = rows[0][0], rows[0][1].split()
        users[uid] = (uid, email, name[0], " ".join(name[1:]),
                      min(parse_date(r[2]) for r in rows).isoformat(),
                      int(any(r[3] in ("yes", "1", "true", "Y") for r in rows)))
        by_email[email] = uid
    posts = []
    for pid, email, title, body in db.execute("SELECT * FROM posts ORDER BY id"):
        if email.strip().lower() in by_email:
            posts.append((pid, by_email[email.strip().lower()], title, body))
    return users, posts


def schema(db):
    out = {}
    for t in ("users", "posts"):
        out[t] = {
            # (name, declared type, notnull, default, pk); type case does not matter in SQL
            "columns": [(r[1], r[2].upper(), r[3], r[4], r[5]) for r in db.execute(f"PRAGMA table_info({t})")],
            "fks": sorted((r[2], r[3], r[4]) for r in db.execute(f"PRAGMA foreign_key_list({t})")),
            "unique": sorted(tuple(c[2] for c in db.execute(f"PRAGMA index_info('{r[1]}')"))
                             for r in db.execute(f"PRAGMA index_list({t})") if r[2]),
            "indexed": sorted(tuple(c[2] for c in db.execute(f"PRAGMA index_info('{r[1]}')"))
                              for r in db.execute(f"PRAGMA index_list({t})")),
        }
    out["tables"] = sorted(r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"))
    return out


def main():
    if not os.path.exists(DB):
        print("FAIL: /app/app.db missing")
        return 0.0
    users, posts = reference()
    ref = sqlite3.connect(":memory:")
    ref.executescript(DDL)
    want_schema = schema(ref)
    db = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    score = 0

    try:
        got_schema = schema(db)
        ok = got_schema == want_schema and db.execute("PRAGMA integrity_check").fetchone()[0] == "ok" \
            and not db.execute("PRAGMA foreign_key_check").fetchall()
    except sqlite3.Error as e:
        got_schema, ok = str(e), False
    print(f"{'PASS' if ok else 'FAIL'}: schema" + ("" if ok else f"\n  got  {got_schema}\n  want {want_schema}"))
    score += ok

    def rows(sql):
        try:
            return db.execute(sql).fetchall()
        except sqlite3.Error as e:
            return f"error: {e}"

    got = rows("SELECT id, email, first_name, last_name FROM users ORDER BY id")
    want = [u[:4] for _, u in sorted(users.items())]
    ok = got == want
    print(f"{'PASS' if ok else 'FAIL'}: users (id, email, names)" + ("" if ok else diff(got, want)))
    score += ok

    got = rows("SELECT id, created_at, is_admin FROM users ORDER BY id")
    want = [(u[0], u[4], u[5]) for _, u in sorted(users.items())]
    ok = got == want
    print(f"{'PASS' if ok else 'FAIL'}: users (created_at, is_admin)" + ("" if ok else diff(got, want)))
    score += ok

    got = rows("SELECT id, user_id, title, body FROM posts ORDER BY id")
    ok = got == posts
    print(f"{'PASS' if ok else 'FAIL'}: posts" + ("" if ok else diff(got, posts)))
    score += ok

    ok = constraints_enforced()
    print(f"{'PASS' if ok else 'FAIL'}: constraints enforced (case-insensitive unique e-mail, FK, CHECK)")
    score += ok
    return score / 5


def diff(got, want):
    if isinstance(got, str):
        return f" ({got})"
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f" (row {i}: got {g}, want {w}; {len(got)} rows vs {len(want)})"
    return f" ({len(got)} rows, want {len(want)})"


def constraints_enforced():
    copy = os.path.join(tempfile.mkdtemp(), "copy.db")
    shutil.copy(DB, copy)
    db = sqlite3.connect(copy)
    db.execute("PRAGMA foreign_keys = ON")
    attempts = {
        "duplicate e-mail in other case": "INSERT INTO users (email, first_name, last_name, created_at, is_admin) "
            "SELECT upper(email), 'X', 'Y', '2024-01-01', 0 FROM users LIMIT 1",
        "post of missing user": "INSERT INTO posts (user_id, title, body) VALUES (999999, 't', 'b')",
        "is_admin = 2": "INSERT INTO users (email, first_name, last_name, created_at, is_admin) "
            "VALUES ('new.person@example.org', 'N', 'P', '2024-01-01', 2)",
    }
    ok = True
    # positive control: well-formed rows must be accepted, so "rejected" means a constraint fired
    try:
        cur = db.execute("INSERT INTO users (email, first_name, last_name, created_at, is_admin) "
                         "VALUES ('control.user@example.org', 'C', 'U', '2024-01-01', 1)")
        db.execute("INSERT INTO posts (user_id, title, body) VALUES (?, 't', 'b')", (cur.lastrowid,))
    except sqlite3.Error as e:
        print(f"  valid rows rejected: {e}")
        return False
    for name, sql in attempts.items():
        try:
            db.execute(sql)
            print(f"  not rejected: {name}")
            ok = False
        except sqlite3.Error:
            pass
    return ok


if __name__ == "__main__":
    reward = main()
    print(f"reward = {reward}")
    with open("/logs/verifier/reward.txt", "w") as f:
        f.write(f"{reward}\n")
