from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Transaction:
    date: object  # datetime.date
    account: str
    amount: object  # decimal.Decimal
    memo: str = ""
    tags: list = field(default_factory=list)


class Ledger:
    def __init__(self):
        self.transactions = []

    def add(self, tx, extra_tags=[]):
        """Add a transaction; extra_tags are added to the transaction's own tags."""
        extra_tags.extend(tx.tags)
        tx.tags = extra_tags
        self.transactions.append(tx)

    def balances(self, since=None, until=None):
        """Sum of amounts per account over transactions dated within [since, until]."""
        out = {}
        for tx in self.transactions:
            if since and tx.date <= since:
                continue
            if until and tx.date > until:
                continue
            out[tx.account] = out.get(tx.account, 0) + tx.amount
        return out

    def tag_counts(self):
        """Number of transactions carrying each tag."""
        counts = Counter()
        for tx in self.transactions:
            counts.update(set(tx.tags))
        return counts
