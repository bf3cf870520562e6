"""Compare /app/out/billing.csv with the billing computed from the entries the timesheet
generator put in the spreadsheet (tests/make_timesheets.py is the script the image ran)."""
import collections
import csv
import sys
from decimal import ROUND_HALF_UP, Decimal

sys.path.insert(0, "/tests")  # python3 -I leaves the script's folder off the path
from make_timesheets import entries, rates  # noqa: E402

HEADER = ["month", "consultant", "project", "hours", "amount_eur"]


def two(x):
    return str(Decimal(str(x)).quantize(Decimal("0.01"), ROUND_HALF_UP))


def expected():
    hours = collections.defaultdict(Decimal)
    for person, day, project, h, billable in entries():
        if billable:
            hours[(f"{day:%Y-%m}", person, project)] += Decimal(str(h))
    rate = rates()
    return [[m, p, pr, two(h), two(h * rate[(p, pr)])] for (m, p, pr), h in sorted(hours.items())]


def main():
    try:
        with open("/app/out/billing.csv", newline="", encoding="utf-8") as f:
            got = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        print(f"FAIL: cannot read /app/out/billing.csv: {e}")
        return False
    want = expected()
    if got[:1] != [HEADER]:
        print(f"FAIL: header {got[:1]}, want {HEADER}")
        return False
    rows = [r for r in got[1:] if r]
    if len(rows) != len(want):
        print(f"FAIL: {len(rows)} rows, want {len(want)}")
    for i, (g, w) in enumerate(zip(rows, want), start=2):
        if g != w:
            print(f"FAIL: row {i}: got {g}, want {w}")
            return False
    if len(rows) != len(want):
        return False
    print(f"PASS: all {len(want)} billing rows")
    return True


sys.exit(0 if main() else 1)
