#!/bin/bash
# Reference solution: pdftotext -layout per file, then one set of patterns per field that covers
# the three suppliers' labels, date formats and number formats.
set -euo pipefail
mkdir -p /app/out
python3 - <<'PY'
import datetime
import json
import re
import subprocess
from pathlib import Path

AMOUNT = r"(£[\d,]+\.\d\d|\$[\d,]+\.\d\d|[\d.]+,\d\d EUR)"


def money(text):
    if text.endswith("EUR"):
        return "EUR", float(text[:-4].replace(".", "").replace(",", "."))
    return {"£": "GBP", "$": "USD"}[text[0]], float(text[1:].replace(",", ""))


def date(text):
    for pattern, fmt in ((r"Date: (\d\d/\d\d/\d{4})", "%d/%m/%Y"),
                         (r"Invoice date: (\d+\. \w+ \d{4})", "%d. %B %Y"),
                         (r"Issued: (\w+ \d+, \d{4})", "%B %d, %Y")):
        if m := re.search(pattern, text):
            return datetime.datetime.strptime(m.group(1), fmt).date().isoformat()
    raise ValueError("no date")


def labelled(text, label):
    return money(re.search(label + r"\s+" + AMOUNT, text).group(1))


rows = []
for pdf in sorted(Path("/app/invoices").glob("*.pdf")):
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True,
                          text=True, check=True).stdout
    body = text.split("Description", 1)[1].split("Subtotal", 1)[0]
    items = [ln for ln in body.splitlines() if re.search(AMOUNT + r"\s*$", ln)]
    currency, subtotal = labelled(text, "Subtotal")
    rows.append({
        "file": pdf.name,
        "invoice_number": re.search(r"Invoice (?:No:|number:|#)\s*(\S+)", text).group(1),
        "vendor": re.search(r"([A-Z][\w.-]*(?: [\w.-]+)*? (?:Ltd|GmbH|Inc\.))", text).group(1),
        "date": date(text),
        "currency": currency,
        "line_items": len(items),
        "subtotal": subtotal,
        "tax": labelled(text, r"(?:VAT|Sales tax)[^\n]*?%\)?")[1],
        "total": labelled(text, r"(?:Total due|Total amount|Amount due)")[1],
    })
rows.sort(key=lambda r: r["invoice_number"])
Path("/app/out/invoices.json").write_text(json.dumps(rows, indent=2, ensure_ascii=False))
PY
