#!/bin/bash
# Reference solution: exact Decimal amounts (with thousands separators), no shared mutable
# default, inclusive 'since', numeric sorting of balances; then run the unit tests.
set -euo pipefail
cd /app/ledger
python3 - <<'PY'
import re
def edit(path, old, new):
    src = open(path).read()
    assert old in src, (path, old)
    open(path, "w").write(src.replace(old, new))

edit("ledger/parse.py", "import csv\n", "import csv\nfrom decimal import Decimal\n")
edit("ledger/parse.py", "return float(text.strip())", 'return Decimal(text.strip().replace(",", ""))')
edit("ledger/model.py", "def add(self, tx, extra_tags=[]):", "def add(self, tx, extra_tags=()):")
edit("ledger/model.py", "extra_tags.extend(tx.tags)\n        tx.tags = extra_tags",
     "tx.tags = list(tx.tags) + [t for t in extra_tags if t not in tx.tags]")
edit("ledger/model.py", "if since and tx.date <= since:", "if since and tx.date < since:")
edit("ledger/model.py", "from collections import Counter\n", "from collections import Counter\nfrom decimal import Decimal\n")
edit("ledger/model.py", "out.get(tx.account, 0)", "out.get(tx.account, Decimal(0))")
edit("ledger/report.py", '''    rows = [(account, f"{balance:.2f}") for account, balance in balances.items()]
    rows.sort(key=lambda r: r[0])
    rows.sort(key=lambda r: r[1], reverse=True)
    return "".join(f"{a}\\t{b}\\n" for a, b in rows)''',
     '''    rows = sorted(balances.items(), key=lambda kv: (-kv[1], kv[0]))
    return "".join(f"{a}\\t{b:.2f}\\n" for a, b in rows)''')
PY
python3 -m unittest discover -s tests -t .
python3 -m ledger report sample.csv
