"""Command line: python3 -m ledger report FILE [--since DATE] [--until DATE] | tags FILE"""
import argparse
import datetime
import sys

from .model import Ledger
from .parse import read_transactions
from .report import format_balances, format_tags


def main(argv=None):
    p = argparse.ArgumentParser(prog="ledger")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report", help="balance per account")
    r.add_argument("file")
    r.add_argument("--since", type=datetime.date.fromisoformat)
    r.add_argument("--until", type=datetime.date.fromisoformat)
    t = sub.add_parser("tags", help="transactions per tag")
    t.add_argument("file")
    args = p.parse_args(argv)
    ledger = Ledger()
    for tx in read_transactions(args.file):
        ledger.add(tx)
    if args.cmd == "report":
        sys.stdout.write(format_balances(ledger.balances(args.since, args.until)))
    else:
        sys.stdout.write(format_tags(ledger.tag_counts()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
