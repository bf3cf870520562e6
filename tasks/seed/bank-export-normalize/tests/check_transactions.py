"""Regenerate the export, derive the expected rows, check bytes-level format and content."""
import csv
import io
import subprocess
import sys

HEADER = ["booking_date", "value_date", "payee", "purpose", "amount"]


def iso(d):
    day, month, year = d.split(".")
    return f"{year}-{month}-{day}"


def expected():
    raw = subprocess.run(["python3", "/tests/gen_export.py"], capture_output=True, check=True).stdout
    lines = raw.decode("iso-8859-1").split("\r\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("Buchungstag;")) + 1
    end = lines.index("", start)
    rows = []
    for r in csv.reader(lines[start:end], delimiter=";"):
        cents = int(r[4].replace(".", "").replace(",", ""))
        sign = "-" if r[5] == "S" else ""
        rows.append([iso(r[0]), iso(r[1]), r[2], r[3], f"{sign}{cents // 100}.{cents % 100:02d}"])
    return rows


def main():
    exp = expected()
    try:
        data = open("/app/output/transactions.csv", "rb").read()
    except OSError as e:
        print(f"FAIL: {e}")
        return False
    ok = True
    if data.startswith(b"\xef\xbb\xbf"):
        print("FAIL: file starts with a UTF-8 BOM")
        ok = False
    if b"\r" in data:
        print("FAIL: file contains \\r (CRLF line endings)")
        ok = False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        print(f"FAIL: not valid UTF-8: {e}")
        return False
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows or rows[0] != HEADER:
        print(f"FAIL: header {rows[:1]}, want {HEADER}")
        return False
    body = rows[1:]
    if body != exp:
        print(f"FAIL: {len(body)} data rows, want {len(exp)}")
        for i, (g, e) in enumerate(zip(body, exp)):
            if g != e:
                print(f"  first difference at row {i + 1}: got {g}, want {e}")
                break
        return False
    print(f"PASS: {len(exp)} transactions" if ok else "content matches but format is wrong")
    return ok


sys.exit(0 if main() else 1)
