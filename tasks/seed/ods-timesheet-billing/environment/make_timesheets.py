"""Consultants' timesheets as one OpenDocument spreadsheet, plus the rate card:
python3 make_timesheets.py OUTDIR writes OUTDIR/timesheets.ods and OUTDIR/rates.csv.

`entries()` is what the sheets hold: (consultant, date, project, hours, billable). Cells show
German-formatted text (`02.05.2024`, `7,5`) over typed values; some hours are time durations,
blank rows are repeated rows, and each sheet ends with a formula subtotal row.
"""
import csv
import datetime
import os
import random
import sys

PEOPLE = ["Ana Costa", "Ben Okafor", "Chen Wei"]
PROJECTS = ["ACME-ERP", "Globex-Audit", "Initech-Cloud", "Internal"]


def entries():
    rng = random.Random(5150)
    out = []
    for person in PEOPLE:
        for _ in range(rng.randint(16, 24)):
            day = datetime.date(2024, 4, 15) + datetime.timedelta(days=rng.randrange(75))
            project = rng.choice(PROJECTS)
            hours = rng.choice([1, 1.5, 2, 2.25, 3, 4, 4.5, 6, 7.5, 8])
            out.append((person, day, project, hours, project != "Internal" and rng.random() > 0.15))
    return out


def rates():
    rng = random.Random(6060)
    return {(p, pr): rng.choice([95, 110, 120, 135, 150]) for p in PEOPLE for pr in PROJECTS
            if pr != "Internal"}


def cell(kind, value=None, shown=None, **extra):
    from odf.table import TableCell
    from odf.text import P

    attrs = dict(extra)
    if kind == "float":
        attrs.update(valuetype="float", value=str(value))
    elif kind == "date":
        attrs.update(valuetype="date", datevalue=value.isoformat())
    elif kind == "time":
        h, m = divmod(round(value * 60), 60)
        attrs.update(valuetype="time", timevalue=f"PT{h:02d}H{m:02d}M00S")
    elif kind == "string":
        attrs.update(valuetype="string")
    c = TableCell(**attrs)
    if shown is not None:
        c.addElement(P(text=shown))
    return c


def blank(rows):
    from odf.table import TableCell, TableRow

    r = TableRow(numberrowsrepeated=str(rows))
    r.addElement(TableCell(numbercolumnsrepeated="4"))
    return r


def main(outdir):
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableRow

    os.makedirs(outdir, exist_ok=True)
    rng = random.Random(99)
    doc = OpenDocumentSpreadsheet()
    rows = entries()
    for person in PEOPLE:
        t = Table(name=person)
        r = TableRow()
        r.addElement(cell("string", shown=f"Timesheet {person} (Q2)", numbercolumnsspanned="4"))
        t.addElement(r)
        t.addElement(blank(2))
        r = TableRow()
        for head in ("Datum", "Projekt", "Stunden", "Abrechenbar"):
            r.addElement(cell("string", shown=head))
        t.addElement(r)
        mine = sorted((e for e in rows if e[0] == person), key=lambda e: e[1])
        for i, (_, day, project, hours, billable) in enumerate(mine):
            r = TableRow()
            r.addElement(cell("date", day, f"{day:%d.%m.%Y}"))
            r.addElement(cell("string", shown=project))
            if rng.random() < 0.3:
                h, m = divmod(round(hours * 60), 60)
                r.addElement(cell("time", hours, f"{h:02d}:{m:02d}"))
            else:
                r.addElement(cell("float", hours, f"{hours:g}".replace(".", ",")))
            r.addElement(cell("string", shown="ja" if billable else "nein"))
            t.addElement(r)
            if i % 6 == 5:
                t.addElement(blank(rng.randint(1, 3)))
        r = TableRow()
        r.addElement(cell("string", shown="Summe"))
        r.addElement(cell("string"))
        total = sum(e[3] for e in mine)
        r.addElement(cell("float", total, f"{total:g}".replace(".", ","),
                          formula="of:=SUM([.C4:.C200])"))
        t.addElement(r)
        doc.spreadsheet.addElement(t)
    doc.save(os.path.join(outdir, "timesheets.ods"))
    with open(os.path.join(outdir, "rates.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["consultant", "project", "rate_eur"])
        for (person, project), rate in sorted(rates().items()):
            w.writerow([person, project, rate])


if __name__ == "__main__":
    main(sys.argv[1])
