#!/bin/bash
# Reference solution: dedupe and filter orders, convert to EUR, aggregate per customer.
set -euo pipefail
mkdir -p /app/out
python3 - <<'PY'
import csv, json
from collections import defaultdict

base = "/app/data"
rates = json.load(open(f"{base}/rates.json"))["rates"]
with open(f"{base}/customers.csv", encoding="utf-8", newline="") as f:
    customers = list(csv.DictReader(f))
known = {int(c["id"]) for c in customers}
orders = {}
with open(f"{base}/orders.csv", newline="") as f:
    for o in csv.DictReader(f):
        if o["status"] in ("paid", "shipped") and int(o["customer_id"]) in known:
            orders[o["order_id"]] = o  # duplicates collapse on order_id
per = defaultdict(list)
for o in orders.values():
    per[int(o["customer_id"])].append(o)
result = []
for c in customers:
    cid = int(c["id"])
    mine = per[cid]
    name = c["name"]
    if "," in name:
        last, first = (p.strip() for p in name.split(",", 1))
        name = f"{first} {last}"
    dates = sorted(o["order_date"] for o in mine)
    result.append({
        "customer_id": cid,
        "name": name,
        "email": c["email"].strip().lower(),
        "country": c["country"],
        "order_count": len(mine),
        "total_eur": round(sum(float(o["amount"]) * rates[o["currency"]] for o in mine), 2),
        "first_order": dates[0] if dates else None,
        "last_order": dates[-1] if dates else None,
        "currencies": sorted({o["currency"] for o in mine}),
    })
result.sort(key=lambda r: (-r["total_eur"], r["customer_id"]))
with open("/app/out/customers.json", "w", encoding="utf-8") as f:
    json.dump(result, f, indent=2, ensure_ascii=False)
PY
