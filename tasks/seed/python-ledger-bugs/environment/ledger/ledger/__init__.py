"""ledger: account balances and tag statistics from a CSV journal."""
from .model import Ledger, Transaction
from .parse import parse_amount, read_transactions

__all__ = ["Ledger", "Transaction", "parse_amount", "read_transactions"]
