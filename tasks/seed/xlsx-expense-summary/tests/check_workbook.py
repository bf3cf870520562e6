"""Open /app/out/expenses.xlsx with openpyxl, check the Data sheet against the regenerated CSV,
then evaluate the Summary formulas (before and after editing Data) with a small evaluator."""
import copy
import csv
import datetime
import subprocess
import sys
import tempfile

import openpyxl

sys.path.insert(0, "/tests")  # python3 -I leaves the script's folder off the path
from xlsx_eval import Eval, excel_round  # noqa: E402

HEAD = ["Date", "Employee", "Department", "Category", "Amount"]
SUMMARY_HEAD = ["Department", "Claims", "Total", "Average"]


def expected(rows):
    depts = sorted({r[2] for r in rows})
    out = []
    for d in depts:
        amounts = [r[4] for r in rows if r[2] == d]
        out.append([d, len(amounts), sum(amounts), excel_round(sum(amounts) / len(amounts), 2)])
    amounts = [r[4] for r in rows]
    out.append(["Total", len(amounts), sum(amounts), excel_round(sum(amounts) / len(amounts), 2)])
    return out


def check_summary(wb, rows, label):
    ws, ev = wb["Summary"], Eval(wb)
    want = expected(rows)
    got_names = [ws.cell(r, 1).value for r in range(2, ws.max_row + 1)]
    if got_names != [w[0] for w in want]:
        print(f"FAIL ({label}): Summary column A {got_names}, want {[w[0] for w in want]}")
        return False
    for i, w in enumerate(want, start=2):
        for col, name in ((2, "Claims"), (3, "Total"), (4, "Average")):
            c = ws.cell(i, col)
            if not (isinstance(c.value, str) and c.value.startswith("=")):
                print(f"FAIL ({label}): Summary!{c.coordinate} ({name}) is {c.value!r}, not a formula")
                return False
            try:
                got = ev.cell("Summary", c.coordinate)
            except Exception as e:  # any error in the agent's formula is a failure
                print(f"FAIL ({label}): Summary!{c.coordinate} {c.value!r}: {type(e).__name__}: {e}")
                return False
            if not isinstance(got, (int, float)) or abs(got - w[col - 1]) > 0.005:
                print(f"FAIL ({label}): Summary!{c.coordinate} {c.value!r} = {got!r}, want {w[col - 1]}")
                return False
    print(f"PASS ({label}): {len(want)} summary rows")
    return True


def main():
    d = tempfile.mkdtemp()
    subprocess.run([sys.executable, "/tests/gen_expenses.py", f"{d}/expenses.csv"], check=True)
    with open(f"{d}/expenses.csv", newline="", encoding="utf-8") as f:
        recs = list(csv.reader(f))[1:]
    rows = [[datetime.datetime.strptime(r[0], "%d/%m/%Y"), r[1], r[2], r[3], float(r[4])] for r in recs]
    try:
        wb = openpyxl.load_workbook("/app/out/expenses.xlsx")
    except Exception as e:
        print(f"FAIL: cannot open /app/out/expenses.xlsx: {type(e).__name__}: {e}")
        return False
    if wb.sheetnames != ["Data", "Summary"]:
        print(f"FAIL: sheets {wb.sheetnames}, want ['Data', 'Summary']")
        return False
    data = wb["Data"]
    got = [[c.value for c in row] for row in data.iter_rows(min_row=1, max_col=5)]
    if got[:1] != [HEAD]:
        print(f"FAIL: Data header {got[:1]}, want {HEAD}")
        return False
    if len(got) - 1 != len(rows):
        print(f"FAIL: Data has {len(got) - 1} records, want {len(rows)}")
        return False
    for i, (g, w) in enumerate(zip(got[1:], rows), start=2):
        date_ok = isinstance(g[0], datetime.datetime) and g[0].date() == w[0].date()
        amount_ok = isinstance(g[4], (int, float)) and not isinstance(g[4], bool) and abs(g[4] - w[4]) < 0.005
        if not (date_ok and amount_ok and g[1:4] == w[1:4]):
            print(f"FAIL: Data row {i} is {g}, want {w}")
            return False
    print(f"PASS: Data has the {len(rows)} records with real dates and numbers")
    heads = [c.value for c in wb["Summary"][1][:4]]
    if heads != SUMMARY_HEAD:
        print(f"FAIL: Summary header {heads}, want {SUMMARY_HEAD}")
        return False
    if not check_summary(wb, rows, "as delivered"):
        return False
    # Edit the data as a user would: new amounts, some claims moved to another department.
    edited = copy.deepcopy(rows)
    depts = sorted({r[2] for r in rows})
    for i, r in enumerate(edited, start=2):
        r[4] = round(r[4] * 1.5 + 7.25, 2)
        data.cell(i, 5).value = r[4]
        if i % 7 == 0:
            r[2] = depts[(depts.index(r[2]) + 1) % len(depts)]
            data.cell(i, 3).value = r[2]
    return check_summary(wb, edited, "after editing Data")


sys.exit(0 if main() else 1)
