"""Check /app/report.sql against an independent Python computation on two databases."""
import collections
import csv
import datetime
import io
import os
import sqlite3
import subprocess
import sys
import tempfile

HEADER = ["month", "category", "orders", "units", "revenue"]


def expected(db_path):
    db = sqlite3.connect(db_path)
    orders = {}
    for oid, created, status in db.execute("SELECT id, created_at, status FROM orders"):
        t = datetime.datetime.fromisoformat(created)
        if t.tzinfo is not None:
            t = t.astimezone(datetime.timezone.utc)
        if status in ("paid", "shipped", "delivered") and t.year == 2023:
            orders[oid] = t.strftime("%Y-%m")
    cats = dict(db.execute("SELECT id, category FROM products"))
    agg = collections.defaultdict(lambda: [set(), 0, 0])
    for oid, pid, qty, unit in db.execute("SELECT order_id, product_id, quantity, unit_price_cents FROM order_items"):
        if oid in orders:
            a = agg[(orders[oid], cats[pid])]
            a[0].add(oid)
            a[1] += qty
            a[2] += qty * unit
    rows = sorted(agg.items(), key=lambda kv: (kv[0][0], -kv[1][2], kv[0][1]))
    return [[m, c, str(len(o)), str(u), f"{cents // 100}.{cents % 100:02d}"] for (m, c), (o, u, cents) in rows]


def run_query(db_path, sql):
    p = subprocess.run(["sqlite3", "-header", "-csv", db_path], input=sql, capture_output=True, text=True, timeout=60)
    if p.returncode != 0 or p.stderr.strip():
        print(f"  sqlite3 exit={p.returncode} stderr={p.stderr[-500:]!r}")
    return list(csv.reader(io.StringIO(p.stdout)))


def main():
    try:
        sql = open("/app/report.sql").read()
    except OSError as e:
        print(f"FAIL: {e}")
        return False
    ok = True
    for seed in (2023, 7):
        db_path = os.path.join(tempfile.mkdtemp(), "shop.db")
        subprocess.run(["python3", "/tests/gen_db.py", db_path, str(seed)], check=True)
        want = expected(db_path)
        got = run_query(db_path, sql)
        if got[:1] != [HEADER]:
            print(f"FAIL (seed {seed}): header {got[:1]}, want {HEADER}")
            ok = False
            continue
        if got[1:] != want:
            ok = False
            print(f"FAIL (seed {seed}): {len(got) - 1} rows, want {len(want)}")
            for i, (g, w) in enumerate(zip(got[1:], want)):
                if g != w:
                    print(f"  first difference at row {i + 1}: got {g}, want {w}")
                    break
        else:
            print(f"PASS (seed {seed}): {len(want)} rows")
    return ok


sys.exit(0 if main() else 1)
