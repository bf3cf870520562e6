"""Deterministic generator for a German bank export: ISO-8859-1, CRLF, ';', decimal commas."""
import csv
import datetime
import io
import random
import sys

rng = random.Random(31)
payees = ["Bäckerei Müller", "Stadtwerke Köln", "Rewe Markt GmbH", "Dr. Jürgen Weiß", "Gehalt ACME AG",
          "Möbelhaus Schöner Wohnen", "Miete Hausverwaltung Groß", "Café Süß", "Amazon EU S.a r.l.",
          "Fa. Meyer; Söhne", "Finanzamt Düsseldorf"]
purposes = ["Brötchen & Kaffee", "Abschlag Strom März", "Einkauf", "Rechnung 2024-117 Behandlung",
            "Lohn/Gehalt 03.2024", "Kauf Regal \"Billy\"", "Miete März", "Frühstück",
            "Bestellung 302-118", "Reparatur Heizung", "Einkommensteuer Q1"]
buf = io.StringIO()
w = csv.writer(buf, delimiter=";", lineterminator="\r\n")
buf.write("Umsatzanzeige;Girokonto\r\nKontonummer;DE12 3456 7890 1234 5678 90\r\n"
          "Zeitraum;01.03.2024 - 31.03.2024\r\n\r\n")
w.writerow(["Buchungstag", "Valuta", "Empfänger/Auftraggeber", "Verwendungszweck", "Betrag", "Soll/Haben"])


def de_amount(cents):
    euros, c = divmod(cents, 100)
    return f"{euros:,}".replace(",", ".") + f",{c:02d}"


balance = 250000
for i in range(60):
    day = datetime.date(2024, 3, 1) + datetime.timedelta(days=i // 2)
    val = day + datetime.timedelta(days=rng.choice([0, 0, 0, 1, 2]))
    k = rng.randrange(len(payees))
    credit = payees[k].startswith("Gehalt") or rng.random() < 0.08
    cents = rng.randint(100, 450000) if credit else rng.randint(95, 189999)
    balance += cents if credit else -cents
    w.writerow([day.strftime("%d.%m.%Y"), val.strftime("%d.%m.%Y"), payees[k], purposes[k],
                de_amount(cents), "H" if credit else "S"])
buf.write("\r\n")
w.writerow(["Endsaldo", "", "", "", de_amount(abs(balance)), "H" if balance >= 0 else "S"])
sys.stdout.buffer.write(buf.getvalue().encode("iso-8859-1"))
