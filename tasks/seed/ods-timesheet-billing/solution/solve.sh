#!/bin/bash
# Reference solution: read the .ods XML directly (zip + ElementTree): typed values from the
# office:* attributes, repeated rows and cells expanded, durations parsed; group and price.
set -euo pipefail
mkdir -p /app/out
python3 - <<'PY'
import collections
import csv
import re
import zipfile
import xml.etree.ElementTree as ET
from decimal import ROUND_HALF_UP, Decimal

NS = {"table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
      "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
      "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0"}
T, O = "{%s}" % NS["table"], "{%s}" % NS["office"]


def value(cell):
    kind = cell.get(O + "value-type")
    if kind == "float":
        return Decimal(cell.get(O + "value"))
    if kind == "date":
        return cell.get(O + "date-value")[:10]
    if kind == "time":
        h, m, s = re.fullmatch(r"PT(\d+)H(\d+)M(\d+)S", cell.get(O + "time-value")).groups()
        return Decimal(h) + Decimal(m) / 60 + Decimal(s) / 3600
    return "".join(p.text or "" for p in cell.findall("text:p", NS))


root = ET.fromstring(zipfile.ZipFile("/app/timesheets.ods").read("content.xml"))
hours = collections.defaultdict(Decimal)
for sheet in root.iter(T + "table"):
    person = sheet.get(T + "name")
    for row in sheet.iter(T + "table-row"):
        cells = []
        for c in row:
            cells += [value(c)] * int(c.get(T + "number-columns-repeated", "1"))
        if len(cells) >= 4 and re.fullmatch(r"\d{4}-\d\d-\d\d", str(cells[0])) and cells[3] == "ja":
            hours[(cells[0][:7], person, cells[1])] += cells[2]
rates = {(r["consultant"], r["project"]): Decimal(r["rate_eur"])
         for r in csv.DictReader(open("/app/data/rates.csv", newline=""))}
q = Decimal("0.01")
with open("/app/out/billing.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["month", "consultant", "project", "hours", "amount_eur"])
    for (month, person, project), h in sorted(hours.items()):
        w.writerow([month, person, project, h.quantize(q, ROUND_HALF_UP),
                    (h * rates[(person, project)]).quantize(q, ROUND_HALF_UP)])
PY
