#!/bin/bash
# Reference solution: decode Latin-1, take the block after the header, convert dates and amounts.
set -euo pipefail
mkdir -p /app/output
iconv -f ISO-8859-1 -t UTF-8 /app/input/umsaetze.csv | python3 -c '
import csv, sys
lines = sys.stdin.read().split("\r\n")
start = next(i for i, l in enumerate(lines) if l.startswith("Buchungstag;")) + 1
end = lines.index("", start)
def iso(d):
    dd, mm, yyyy = d.split(".")
    return f"{yyyy}-{mm}-{dd}"
with open("/app/output/transactions.csv", "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["booking_date", "value_date", "payee", "purpose", "amount"])
    for r in csv.reader(lines[start:end], delimiter=";"):
        amount = r[4].replace(".", "").replace(",", ".")
        w.writerow([iso(r[0]), iso(r[1]), r[2], r[3], ("-" if r[5] == "S" else "") + amount])
'
