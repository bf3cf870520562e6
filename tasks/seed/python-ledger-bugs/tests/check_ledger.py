"""Score the fixed ledger package: original unit tests plus CLI runs on generated journals,
compared with an independent reference implementation."""
import collections
import csv
import datetime
import os
import random
import shutil
import subprocess
import tempfile
from decimal import Decimal

APP = "/app/ledger"
WORK = tempfile.mkdtemp()
ACCOUNTS = ["bank", "cash", "rent", "groceries", "travel", "savings", "utilities", "salary", "gifts", "fees"]
TAGS = ["food", "housing", "fixed", "income", "trip", "gift", "tax", "misc"]


def journal(name, seed, n, thousands, days=60):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        date = datetime.date(2024, 1, 1) + datetime.timedelta(days=rng.randrange(days))
        cents = rng.randint(-250000, 400000) if thousands else rng.randint(-999, 999)
        amount = f"{Decimal(cents) / 100:.2f}"
        if thousands and abs(cents) >= 100000 and rng.random() < 0.7:
            amount = f"{Decimal(cents) / 100:,.2f}"
        tags = rng.sample(TAGS, rng.randint(0, 3))
        rows.append([date.isoformat(), rng.choice(ACCOUNTS), amount, "memo", ";".join(tags)])
    path = os.path.join(WORK, name)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["date", "account", "amount", "memo", "tags"])
        w.writerows(rows)
    return path, rows


def ref_report(rows, since=None, until=None):
    bal = collections.defaultdict(Decimal)
    for d, acct, amount, _m, _t in rows:
        if (since is None or d >= since) and (until is None or d <= until):
            bal[acct] += Decimal(amount.replace(",", ""))
    return "".join(f"{a}\t{b:.2f}\n" for a, b in sorted(bal.items(), key=lambda kv: (-kv[1], kv[0])))


def ref_tags(rows):
    c = collections.Counter(t for r in rows for t in set(filter(None, r[4].split(";"))))
    return "".join(f"{t}\t{n}\n" for t, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def cli(*args):
    p = subprocess.run(["python3", "-m", "ledger", *args], cwd=APP, capture_output=True, text=True, timeout=60)
    return p.stdout if p.returncode == 0 else f"<exit {p.returncode}>\n{p.stderr[-600:]}"


def compare(label, got, want):
    if got == want:
        return True
    print(f"  {label}: got\n{got[:400]}\n  want\n{want[:400]}")
    return False


def check_unit_tests():
    # run the original tests against the agent's package, whatever is now in /app/ledger/tests
    root = os.path.join(WORK, "unit")
    os.makedirs(os.path.join(root, "tests"))
    shutil.copytree(os.path.join(APP, "ledger"), os.path.join(root, "ledger"))
    shutil.copy("/tests/orig_test_ledger.py", os.path.join(root, "tests", "test_ledger.py"))
    open(os.path.join(root, "tests", "__init__.py"), "w").close()
    p = subprocess.run(["python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."], cwd=root,
                       capture_output=True, text=True, timeout=60)
    ok = p.returncode == 0 and "Ran 7 tests" in p.stderr
    if not ok:
        print(p.stderr[-1500:])
    return ok


def check_report():
    path, rows = journal("big.csv", 11, 400, thousands=True)
    return compare("report", cli("report", path), ref_report(rows))


def check_date_range():
    path, rows = journal("range.csv", 12, 150, thousands=False, days=20)
    since, until = "2024-01-06", "2024-01-12"
    assert any(r[0] == since for r in rows) and any(r[0] == until for r in rows)
    ok = compare("report --since --until", cli("report", path, "--since", since, "--until", until),
                 ref_report(rows, since, until))
    return compare("report --since", cli("report", path, "--since", until), ref_report(rows, since=until)) and ok


def check_tags():
    path, rows = journal("tags.csv", 13, 300, thousands=True)
    return compare("tags", cli("tags", path), ref_tags(rows))


def main():
    checks = [check_unit_tests, check_report, check_date_range, check_tags]
    passed = 0
    for check in checks:
        try:
            ok = bool(check())
        except Exception as e:
            print(f"  error: {e!r}")
            ok = False
        print(f"{'PASS' if ok else 'FAIL'}: {check.__name__}")
        passed += ok
    return passed / len(checks)


if __name__ == "__main__":
    reward = main()
    print(f"reward = {reward}")
    with open("/logs/verifier/reward.txt", "w") as f:
        f.write(f"{reward}\n")
