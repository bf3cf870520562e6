import datetime
import unittest
from decimal import Decimal

from ledger import Ledger, Transaction, parse_amount
from ledger.report import format_balances

D = datetime.date


class ParseTest(unittest.TestCase):
    def test_plain_amounts(self):
        self.assertEqual(parse_amount("12.50"), Decimal("12.50"))
        self.assertEqual(parse_amount(" -3 "), Decimal("-3"))

    def test_thousands_separator(self):
        self.assertEqual(parse_amount("1,234.50"), Decimal("1234.50"))
        self.assertEqual(parse_amount("-12,000"), Decimal("-12000"))


class LedgerTest(unittest.TestCase):
    def test_balances_are_exact(self):
        ledger = Ledger()
        for amount in ("0.10", "0.20"):
            ledger.add(Transaction(D(2024, 1, 1), "cash", parse_amount(amount)))
        self.assertEqual(ledger.balances(), {"cash": Decimal("0.30")})

    def test_until_is_inclusive(self):
        ledger = Ledger()
        ledger.add(Transaction(D(2024, 1, 31), "cash", Decimal("5")))
        ledger.add(Transaction(D(2024, 2, 1), "cash", Decimal("7")))
        self.assertEqual(ledger.balances(until=D(2024, 1, 31)), {"cash": Decimal("5")})

    def test_tags_are_per_transaction(self):
        ledger = Ledger()
        ledger.add(Transaction(D(2024, 1, 1), "cash", Decimal("1"), tags=["food"]))
        ledger.add(Transaction(D(2024, 1, 2), "cash", Decimal("1"), tags=["rent"]))
        self.assertEqual([tx.tags for tx in ledger.transactions], [["food"], ["rent"]])

    def test_extra_tags(self):
        ledger = Ledger()
        tx = Transaction(D(2024, 1, 1), "cash", Decimal("1"), tags=["a"])
        ledger.add(tx, ["b"])
        self.assertEqual(sorted(tx.tags), ["a", "b"])


class ReportTest(unittest.TestCase):
    def test_format(self):
        self.assertEqual(format_balances({"cash": Decimal("5"), "bank": Decimal("-2.5")}),
                         "cash\t5.00\nbank\t-2.50\n")


if __name__ == "__main__":
    unittest.main()
