"""Read /app/out/report.docx with python-docx, block by block (paragraphs and tables in body
order), and compare with the structure expected from the report's content."""
import re
import sys

import docx
from docx.table import Table
from docx.text.paragraph import Paragraph

sys.path.insert(0, "/tests")  # python3 -I leaves the script's folder off the path
from make_report import blocks  # noqa: E402


def expected():
    out = []
    for kind, value in blocks():
        if kind == "title":
            out.append(("Title", value, ""))
        elif kind in ("h1", "h2"):
            style = "Heading 1" if kind == "h1" else "Heading 2"
            out.append((style, re.sub(r"^[0-9.]+ ", "", value), ""))
        elif kind == "p":
            out.append(("body", "".join(t for t, _ in value), "".join(t for t, b in value if b)))
        elif kind == "table":
            if out and out[-1][0] == "table":
                raise AssertionError("adjacent tables in the content")
            out.append(("table", value, "Table Grid"))
    return out


def actual(doc):
    out = []
    for el in doc.element.body.iterchildren():
        tag = el.tag.rsplit("}", 1)[-1]
        if tag == "p":
            p = Paragraph(el, doc)
            style = p.style.name if p.style is not None else ""
            bold = "".join(r.text for r in p.runs if r.bold)
            kind = style if style.startswith(("Heading", "Title")) else "body"
            out.append((kind, p.text, bold if kind == "body" else ""))
        elif tag == "tbl":
            t = Table(el, doc)
            rows = [[c.text for c in row.cells] for row in t.rows]
            out.append(("table", rows, t.style.name if t.style is not None else ""))
    return out


def main():
    try:
        doc = docx.Document("/app/out/report.docx")
    except Exception as e:
        print(f"FAIL: cannot open /app/out/report.docx: {type(e).__name__}: {e}")
        return False
    want, got = expected(), actual(doc)
    ok = True
    for i in range(max(len(want), len(got))):
        w = want[i] if i < len(want) else None
        g = got[i] if i < len(got) else None
        if g != w:
            print(f"FAIL: block {i + 1}: got {g!r}, want {w!r}")
            ok = False
            break
    if ok:
        print(f"PASS: all {len(want)} blocks (title, headings, tables, paragraphs) as expected")
    return ok


sys.exit(0 if main() else 1)
