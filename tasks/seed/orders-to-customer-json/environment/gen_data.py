"""Deterministic generator for the customer/order export in /app/data (seeded)."""
import csv
import datetime
import json
import os
import random
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = random.Random(4242)
first = ["Ana", "Ben", "Chloé", "Dmitri", "Eva", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kai", "Lena",
         "Mateo", "Nora", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tara"]
last = ["Müller", "Smith", "O'Brien", "García", "Rossi", "Nowak", "Jensen", "Dubois", "Tanaka", "Silva"]
countries = ["DE", "FR", "GB", "US", "JP", "PL", "IT"]
with open(os.path.join(out, "customers.csv"), "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["id", "name", "email", "country", "signup_date"])
    for cid in range(1, 41):
        fn, ln = rng.choice(first), rng.choice(last)
        name = f"{ln}, {fn}" if rng.random() < 0.3 else f"{fn} {ln}"
        email = f"{fn}.{ln}{cid}@example.com".replace("'", "").replace("é", "e").replace("ü", "u")
        if rng.random() < 0.3:
            email = "  " + email.upper() + " "
        d = datetime.date(2022, 1, 1) + datetime.timedelta(days=rng.randint(0, 500))
        w.writerow([cid, name, email, rng.choice(countries), d.isoformat()])
rates = {"EUR": 1.0, "USD": 0.92, "GBP": 1.17, "JPY": 0.0062, "PLN": 0.23}
with open(os.path.join(out, "rates.json"), "w") as f:
    json.dump({"base": "EUR", "rates": rates}, f, indent=2)
rows = []
for oid in range(1001, 1301):
    cid = rng.randint(1, 44)  # 41..44 do not exist: orphaned orders
    if cid in (7, 19):
        continue  # customers with no orders at all
    cur = rng.choice(list(rates))
    amount = rng.randint(500, 250000) / 100 if cur != "JPY" else float(rng.randint(800, 40000))
    d = datetime.date(2023, 1, 1) + datetime.timedelta(days=rng.randint(0, 364))
    status = rng.choices(["paid", "shipped", "cancelled", "refunded"], [6, 6, 1, 1])[0]
    rows.append([f"ORD-{oid}", cid, d.isoformat(), f"{amount:.2f}", cur, status])
for r in rng.sample(rows, 12):
    rows.append(list(r))  # the export tool wrote some orders twice
rng.shuffle(rows)
with open(os.path.join(out, "orders.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["order_id", "customer_id", "order_date", "amount", "currency", "status"])
    w.writerows(rows)
