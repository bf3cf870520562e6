import csv
import datetime

from .model import Transaction


def parse_amount(text):
    """Parse an amount such as '12.50', '-3', '1,234.50' into an exact decimal."""
    return float(text.strip())


def read_transactions(path):
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            yield Transaction(
                date=datetime.date.fromisoformat(row["date"]),
                account=row["account"].strip(),
                amount=parse_amount(row["amount"]),
                memo=row.get("memo", ""),
                tags=[t for t in row.get("tags", "").split(";") if t],
            )
