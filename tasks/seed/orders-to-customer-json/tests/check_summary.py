"""Recompute the expected summary (exact decimals) from a regenerated export and compare."""
import csv
import json
import subprocess
import sys
import tempfile
from decimal import ROUND_HALF_UP, Decimal

KEYS = ["customer_id", "name", "email", "country", "order_count", "total_eur",
        "first_order", "last_order", "currencies"]


def expected():
    d = tempfile.mkdtemp()
    subprocess.run(["python3", "/tests/gen_data.py", d], check=True)
    rates = {k: Decimal(str(v)) for k, v in json.load(open(f"{d}/rates.json"))["rates"].items()}
    customers = list(csv.DictReader(open(f"{d}/customers.csv", encoding="utf-8", newline="")))
    ids = {int(c["id"]) for c in customers}
    orders = {}
    for o in csv.DictReader(open(f"{d}/orders.csv", newline="")):
        if o["status"] in ("paid", "shipped") and int(o["customer_id"]) in ids:
            orders[o["order_id"]] = o
    out = []
    for c in customers:
        cid = int(c["id"])
        mine = [o for o in orders.values() if int(o["customer_id"]) == cid]
        total = sum((Decimal(o["amount"]) * rates[o["currency"]] for o in mine), Decimal(0))
        name = c["name"]
        if ", " in name:
            last, first = name.split(", ", 1)
            name = f"{first} {last}"
        dates = sorted(o["order_date"] for o in mine)
        out.append({
            "customer_id": cid, "name": name, "email": c["email"].strip().lower(),
            "country": c["country"], "order_count": len(mine),
            "total_eur": float(total.quantize(Decimal("0.01"), ROUND_HALF_UP)),
            "first_order": dates[0] if dates else None, "last_order": dates[-1] if dates else None,
            "currencies": sorted({o["currency"] for o in mine}),
        })
    out.sort(key=lambda r: (-r["total_eur"], r["customer_id"]))
    return out


def main():
    exp = expected()
    try:
        got = json.load(open("/app/out/customers.json", encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"FAIL: cannot read /app/out/customers.json: {e}")
        return False
    if not isinstance(got, list) or len(got) != len(exp):
        print(f"FAIL: expected an array of {len(exp)} objects, got {type(got).__name__} "
              f"of length {len(got) if isinstance(got, list) else '-'}")
        return False
    ok = True
    for i, (g, e) in enumerate(zip(got, exp)):
        if not isinstance(g, dict) or sorted(g) != sorted(KEYS):
            print(f"FAIL: element {i} keys {sorted(g) if isinstance(g, dict) else g!r}, want {sorted(KEYS)}")
            return False
        for k in KEYS:
            gv, ev = g[k], e[k]
            if k == "total_eur":
                good = isinstance(gv, (int, float)) and not isinstance(gv, bool) and abs(gv - ev) <= 0.0101
            elif k in ("customer_id", "order_count"):
                good = type(gv) is int and gv == ev
            else:
                good = gv == ev
            if not good:
                print(f"FAIL: element {i} (want customer {e['customer_id']}) key {k}: got {gv!r}, want {ev!r}")
                ok = False
    if ok:
        print(f"PASS: all {len(exp)} customers match")
    return ok


sys.exit(0 if main() else 1)
