"""Deterministic shop database: python3 gen_db.py PATH SEED."""
import datetime
import random
import sqlite3
import sys

path, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
db = sqlite3.connect(path)
db.executescript("""
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
                       price_cents INTEGER NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     created_at TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id),
                          product_id INTEGER NOT NULL REFERENCES products(id),
                          quantity INTEGER NOT NULL, unit_price_cents INTEGER NOT NULL);
""")
cats = ["books", "garden", "kitchen", "toys", "electronics"]
for i in range(1, 31):
    db.execute("INSERT INTO customers VALUES (?,?,?)", (i, f"Customer {i}", rng.choice(["DE", "FR", "US", "JP"])))
for i in range(1, 41):
    db.execute("INSERT INTO products VALUES (?,?,?,?)", (i, f"Product {i}", cats[i % len(cats)], rng.randint(199, 19999)))
prices = dict(db.execute("SELECT id, price_cents FROM products"))
statuses = ["paid"] * 5 + ["shipped"] * 4 + ["delivered"] * 4 + ["cancelled", "pending", "refunded"]
oid = 0
for _ in range(700):
    oid += 1
    start = datetime.datetime(2022, 12, 1) if rng.random() < 0.9 else datetime.datetime(2023, 12, 20)
    t = start + datetime.timedelta(seconds=rng.randrange(400 * 86400))
    if rng.random() < 0.08:  # orders placed right after local midnight on the 1st, stored with an offset
        t = t.replace(day=1, hour=0, minute=rng.randint(0, 59))
    offset = rng.choice([None, None, None, 2, 9, -5])
    if offset is None:
        stamp = t.strftime("%Y-%m-%d %H:%M:%S")
    else:
        sign = "+" if offset >= 0 else "-"
        stamp = t.strftime("%Y-%m-%dT%H:%M:%S") + f"{sign}{abs(offset):02d}:00"
    db.execute("INSERT INTO orders VALUES (?,?,?,?)", (oid, rng.randint(1, 30), stamp, rng.choice(statuses)))
    for pid in rng.sample(range(1, 41), rng.randint(1, 4)):
        unit = prices[pid] if rng.random() < 0.7 else int(prices[pid] * rng.choice([0.8, 0.9, 1.1]))
        db.execute("INSERT INTO order_items VALUES (?,?,?,?)", (oid, pid, rng.randint(1, 5), unit))
db.commit()
db.close()
