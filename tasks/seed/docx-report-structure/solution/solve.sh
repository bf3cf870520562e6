#!/bin/bash
# Reference solution: edit the document in place with python-docx: styles for the title and the
# numbered headings, tab-separated runs of lines turned into tables moved to where they stood,
# draft and empty paragraphs removed; body paragraphs (and their bold runs) untouched.
set -euo pipefail
mkdir -p /app/out
python3 - <<'PY'
import re

import docx

doc = docx.Document("/app/report.docx")
paras = list(doc.paragraphs)
groups, current = [], []
for i, p in enumerate(paras):
    text = p.text
    if "\t" in text:
        current.append(p)
        continue
    if current:
        groups.append(current)
        current = []
    if i == 0:
        p.style = doc.styles["Title"]
    elif not text.strip() or text.strip() == "DRAFT - do not circulate":
        p._element.getparent().remove(p._element)
    elif m := re.match(r"^(\d+)(\.\d+)? (.+)$", text):
        p.style = doc.styles["Heading 2" if m.group(2) else "Heading 1"]
        p.text = m.group(3)
if current:
    groups.append(current)
for group in groups:
    rows = [p.text.split("\t") for p in group]
    table = doc.add_table(rows=len(rows), cols=max(len(r) for r in rows))
    table.style = doc.styles["Table Grid"]
    for r, cells in enumerate(rows):
        for c, value in enumerate(cells):
            table.cell(r, c).text = value
    group[0]._element.addprevious(table._tbl)
    for p in group:
        p._element.getparent().remove(p._element)
doc.save("/app/out/report.docx")
PY
