"""The quarterly report as a colleague typed it: python3 make_report.py OUT.docx.

`blocks()` is the report's content: (kind, value) with kind title, draft, h1, h2, p (a list of
(text, bold) runs), blank or table (rows of cells). Every block is a plain Normal paragraph in
the file: headings are only bold, tables are tab-separated lines.
"""
import random
import sys

MONTHS = ["April", "May", "June"]


def table(rng, regions):
    rows = [["Month", *regions, "Total"]]
    for m in MONTHS:
        vals = [rng.randint(120, 980) for _ in regions]
        rows.append([m, *map(str, vals), str(sum(vals))])
    return rows


def blocks():
    rng = random.Random(2024)
    return [
        ("title", "Quarterly Operations Report Q2 2024"),
        ("draft", "DRAFT - do not circulate"),
        ("h1", "1 Summary"),
        ("p", [("Orders rose by ", False), (f"{rng.randint(5, 19)} %", True),
               (" against Q1, driven by the new online channel.", False)]),
        ("blank", ""),
        ("p", [("Returns stayed flat; details per region follow.", False)]),
        ("h1", "2 Regional results"),
        ("h2", "2.1 North"),
        ("p", [("Shipments per month (units):", False)]),
        ("table", table(rng, ["Leeds", "York", "Hull"])),
        ("p", [("York's depot was closed for ", False), ("two weeks", True), (" in May.", False)]),
        ("h2", "2.2 South"),
        ("table", table(rng, ["Bath", "Exeter"])),
        ("blank", ""),
        ("p", [("Exeter exceeded its target in every month.", False)]),
        ("draft", "DRAFT - do not circulate"),
        ("h1", "3 Outlook"),
        ("p", [("Hiring for the ", False), ("Hull", True), (" site starts in ", False),
               ("August", True), (".", False)]),
    ]


def main(path):
    from docx import Document
    from docx.shared import Pt, RGBColor

    doc = Document()
    for kind, value in blocks():
        if kind == "table":
            for row in value:
                doc.add_paragraph("\t".join(row))
            continue
        para = doc.add_paragraph()
        runs = value if kind == "p" else [(value, kind in ("title", "h1", "h2"))]
        for text, bold in runs:
            run = para.add_run(text)
            run.bold = bold or None
            if kind in ("title", "h1", "h2"):
                run.font.size = Pt({"title": 20, "h1": 14, "h2": 12}[kind])
            if kind == "draft":
                run.italic = True
                run.font.color.rgb = RGBColor(0x99, 0x99, 0x99)
    doc.save(path)


if __name__ == "__main__":
    main(sys.argv[1])
