def format_balances(balances):
    """One 'account<TAB>balance' line per account, largest balance first, ties by account name."""
    rows = [(account, f"{balance:.2f}") for account, balance in balances.items()]
    rows.sort(key=lambda r: r[0])
    rows.sort(key=lambda r: r[1], reverse=True)
    return "".join(f"{a}\t{b}\n" for a, b in rows)


def format_tags(counts):
    """One 'tag<TAB>count' line per tag, most used first, ties by tag name."""
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return "".join(f"{t}\t{n}\n" for t, n in rows)
