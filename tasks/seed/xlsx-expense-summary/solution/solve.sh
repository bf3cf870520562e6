#!/bin/bash
# Reference solution: read the CSV, write typed Data rows, and Summary formulas over whole
# columns (SUMIF/COUNTIF/AVERAGEIF keyed on the department name in column A).
set -euo pipefail
mkdir -p /app/out
python3 - <<'PY'
import csv
import datetime

from openpyxl import Workbook

with open("/app/data/expenses.csv", newline="", encoding="utf-8") as f:
    recs = list(csv.DictReader(f))
wb = Workbook()
data = wb.active
data.title = "Data"
data.append(["Date", "Employee", "Department", "Category", "Amount"])
for r in recs:
    day = datetime.datetime.strptime(r["date"], "%d/%m/%Y")
    data.append([day, r["employee"], r["department"], r["category"], float(r["amount"])])
    data.cell(data.max_row, 1).number_format = "yyyy-mm-dd"
summary = wb.create_sheet("Summary")
summary.append(["Department", "Claims", "Total", "Average"])
depts = sorted({r["department"] for r in recs})
for i, dept in enumerate(depts, start=2):
    summary.append([
        dept,
        f"=COUNTIF(Data!$C:$C,A{i})",
        f"=SUMIF(Data!$C:$C,A{i},Data!$E:$E)",
        f"=ROUND(AVERAGEIF(Data!$C:$C,A{i},Data!$E:$E),2)",
    ])
last = len(depts) + 1
summary.append(["Total", f"=SUM(B2:B{last})", f"=SUM(C2:C{last})", "=ROUND(AVERAGE(Data!$E:$E),2)"])
wb.save("/app/out/expenses.xlsx")
PY
