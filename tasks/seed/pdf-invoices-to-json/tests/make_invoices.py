"""Deterministic invoice PDFs from three vendors with their own layouts and number formats.

python3 make_invoices.py OUTDIR writes OUTDIR/scan_NNN.pdf; `invoices()` returns the records.
The PDFs are written by hand (Type1 Helvetica, Flate-compressed page content).
"""
import datetime
import os
import random
import sys
import zlib

VENDORS = [
    ("Northwind Office Supplies Ltd", "GBP", 20),
    ("Bergmann Technik GmbH", "EUR", 19),
    ("Cascade Cloud Inc.", "USD", 8.25),
]
ITEMS = ["Paper A4 (box)", "Toner cartridge", "Desk lamp", "USB-C dock", "Support hours",
         "Cloud storage 1 TB", "Licence renewal", "Cable set", "Monitor arm", "Installation"]


def invoices():
    rng = random.Random(77)
    out = []
    for n in range(9):
        vendor, currency, rate = VENDORS[n % 3]
        items = [(rng.choice(ITEMS), rng.randint(1, 12), rng.randint(250, 45000))
                 for _ in range(rng.randint(2, 5))]
        sub = sum(q * c for _, q, c in items)
        tax = (sub * int(rate * 100) + 5000) // 10000  # cents, half up
        day = datetime.date(2024, 1, 2) + datetime.timedelta(days=rng.randrange(180))
        number = [f"NW-2024-{rng.randint(100, 999):04d}", f"BT/24/{rng.randint(10, 99):04d}",
                  f"CC-{rng.randint(10000, 99999)}"][n % 3]
        out.append({"vendor": vendor, "currency": currency, "rate": rate, "items": items,
                    "subtotal": sub, "tax": tax, "total": sub + tax, "date": day, "number": number})
    order = list(range(len(out)))
    rng.shuffle(order)
    for i, rec in zip(order, out):
        rec["file"] = f"scan_{i + 101:03d}.pdf"
    return out


def money(cents, style):
    whole, frac = f"{cents // 100:,}", f"{cents % 100:02d}"
    if style == "EUR":
        return f"{whole.replace(',', '.')},{frac} EUR"
    return ("\u00a3" if style == "GBP" else "$") + f"{whole}.{frac}"


def lines_for(r):
    cur, m = r["currency"], (lambda c: money(c, r["currency"]))
    d = r["date"]
    if cur == "GBP":
        head = [(50, 790, 16, r["vendor"]), (50, 770, 9, "12 Harbour Road, Bristol BS1 4QA"),
                (400, 740, 20, "INVOICE"), (400, 715, 10, f"Invoice No: {r['number']}"),
                (400, 700, 10, f"Date: {d:%d/%m/%Y}")]
    elif cur == "EUR":
        head = [(50, 790, 10, "Invoice date: " + f"{d.day}. {d:%B %Y}"),
                (50, 770, 10, f"Invoice number: {r['number']}"),
                (330, 790, 14, r["vendor"]), (330, 774, 9, "Industriestr. 8, 70565 Stuttgart")]
    else:
        head = [(50, 790, 18, f"Invoice #{r['number']}"), (50, 768, 10, f"Issued: {d:%B} {d.day}, {d.year}"),
                (50, 740, 10, "From: " + r["vendor"]), (50, 726, 9, "500 Pine St, Seattle WA")]
    out = list(head) + [(50, 650, 10, "Description"), (300, 650, 10, "Qty"),
                        (360, 650, 10, "Unit price"), (470, 650, 10, "Amount")]
    y = 630
    for desc, qty, cents in r["items"]:
        out += [(50, y, 10, desc), (300, y, 10, str(qty)), (360, y, 10, m(cents)),
                (470, y, 10, m(qty * cents))]
        y -= 18
    rate = f"{r['rate']:g}%"
    label = {"GBP": f"VAT ({rate})", "EUR": f"VAT {rate}", "USD": f"Sales tax ({rate})"}[cur]
    total = {"GBP": "Total due", "EUR": "Total amount", "USD": "Amount due"}[cur]
    out += [(360, y - 20, 10, "Subtotal"), (470, y - 20, 10, m(r["subtotal"])),
            (360, y - 38, 10, label), (470, y - 38, 10, m(r["tax"])),
            (360, y - 60, 12, total), (470, y - 60, 12, m(r["total"])),
            (50, 80, 8, "Payment within 30 days. Thank you for your business.")]
    return out


def pdf_bytes(lines):
    def esc(s):
        return s.encode("cp1252").replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
    ops = b"".join(b"BT /F1 %d Tf %d %d Td (%s) Tj ET\n" % (size, x, y, esc(text))
                   for x, y, size, text in lines)
    body = zlib.compress(ops)
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(body), body)]
    out, offsets = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"), []
    for i, obj in enumerate(objs, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (i, obj)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


if __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    for rec in invoices():
        with open(os.path.join(sys.argv[1], rec["file"]), "wb") as f:
            f.write(pdf_bytes(lines_for(rec)))
