"""Compare /app/out/invoices.json with the records the invoice generator printed."""
import json
import sys

sys.path.insert(0, "/tests")  # python3 -I leaves the script's folder off the path
from make_invoices import invoices  # noqa: E402

KEYS = ["file", "invoice_number", "vendor", "date", "currency", "line_items", "subtotal", "tax", "total"]


def expected():
    rows = [{"file": r["file"], "invoice_number": r["number"], "vendor": r["vendor"],
             "date": r["date"].isoformat(), "currency": r["currency"], "line_items": len(r["items"]),
             "subtotal": r["subtotal"] / 100, "tax": r["tax"] / 100, "total": r["total"] / 100}
            for r in invoices()]
    return sorted(rows, key=lambda r: r["invoice_number"])


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def main():
    want = expected()
    try:
        with open("/app/out/invoices.json", encoding="utf-8") as f:
            got = json.load(f)
    except (OSError, ValueError) as e:
        print(f"FAIL: cannot read /app/out/invoices.json: {e}")
        return False
    if not isinstance(got, list) or len(got) != len(want):
        print(f"FAIL: want an array of {len(want)} objects, got {type(got).__name__}"
              f" of length {len(got) if isinstance(got, list) else '-'}")
        return False
    ok = True
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(g, dict) or sorted(g) != sorted(KEYS):
            print(f"FAIL: element {i}: keys {sorted(g) if isinstance(g, dict) else g!r}, want {sorted(KEYS)}")
            return False
        for k in KEYS:
            if k in ("subtotal", "tax", "total"):
                good = is_number(g[k]) and abs(g[k] - w[k]) < 0.005
            elif k == "line_items":
                good = type(g[k]) is int and g[k] == w[k]
            else:
                good = g[k] == w[k]
            if not good:
                print(f"FAIL: element {i} ({w['file']}) {k}: got {g[k]!r}, want {w[k]!r}")
                ok = False
    if ok:
        print(f"PASS: all {len(want)} invoices match")
    return ok


sys.exit(0 if main() else 1)
