"""Build numstat with its own Makefile, then compare its output with statistics computed here."""
import math
import os
import random
import re
import subprocess
import tempfile

ROOT = "/app/numstat"
BIN = os.path.join(ROOT, "build", "numstat")
KEYS = ["count", "min", "max", "mean", "median", "stddev"]


def expected(values):
    v = sorted(values)
    n = len(v)
    m = sum(values) / n
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    sd = math.sqrt(sum((x - m) ** 2 for x in values) / n)
    return {"count": n, "min": v[0], "max": v[-1], "mean": m, "median": med, "stddev": sd}


def run(stdin_text=None, path=None):
    args = [BIN] + ([path] if path else [])
    return subprocess.run(args, input=stdin_text, capture_output=True, text=True, timeout=10)


def matches(proc, values):
    want = expected(values)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != 6:
        print(f"  exit={proc.returncode} stdout={proc.stdout!r} stderr={proc.stderr[-300:]!r}")
        return False
    for key, line in zip(KEYS, lines):
        pat = r"count: (\d+)" if key == "count" else rf"{key}: (-?\d+\.\d{{3}})"
        m = re.fullmatch(pat, line)
        if not m or abs(float(m.group(1)) - want[key]) > 0.0011:
            print(f"  line {line!r}: want {key} = {want[key]:.3f}")
            return False
    return True


def check_build():
    subprocess.run(["make", "clean"], cwd=ROOT, capture_output=True, timeout=60)
    p = subprocess.run(["make"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    ok = p.returncode == 0 and os.access(BIN, os.X_OK)
    if not ok:
        print(f"  make exit={p.returncode}\n{(p.stdout + p.stderr)[-1500:]}")
    return ok


def check_odd():
    rng = random.Random(5)
    values = [round(rng.uniform(-5, 5), 2) for _ in range(101)]  # close values expose bad sorting
    return matches(run("\n".join(map(str, values)) + "\n"), values)


def check_even_file():
    rng = random.Random(6)
    values = [round(rng.uniform(0, 3), 3) for _ in range(40)] + [1e3, -2.5e1]
    fd, path = tempfile.mkstemp(suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(map(repr, values)) + "\n")
    return matches(run(path=path), values)


def check_ignorable():
    text = "# readings\n\n  4.5\n\t2\n   \n# 99\n1.25  \n\n3\n"
    ok = matches(run(text), [4.5, 2, 1.25, 3])
    empty = run("# nothing here\n\n   \n")
    if empty.returncode != 0 or empty.stdout != "count: 0\n":
        print(f"  comments-only input: exit={empty.returncode} stdout={empty.stdout!r}")
        ok = False
    return ok


def check_invalid():
    p = run("1.5\n\n# note\n2\n2.5x\n3\n")
    ok = p.returncode == 2 and p.stdout == "" and "numstat: invalid number on line 5" in p.stderr
    if not ok:
        print(f"  exit={p.returncode} stdout={p.stdout!r} stderr={p.stderr!r}")
    return ok


def main():
    checks = [check_build, check_odd, check_even_file, check_ignorable, check_invalid]
    passed = 0
    built = False
    for check in checks:
        if check is not check_build and not built:
            print(f"FAIL: {check.__name__} (no binary)")
            continue
        try:
            ok = check()
        except Exception as e:  # a crash or hang of the program under test is a failed check
            print(f"  error: {e!r}")
            ok = False
        if check is check_build:
            built = ok
        print(f"{'PASS' if ok else 'FAIL'}: {check.__name__}")
        passed += ok
    return passed / len(checks)


if __name__ == "__main__":
    reward = main()
    print(f"reward = {reward}")
    with open("/logs/verifier/reward.txt", "w") as f:
        f.write(f"{reward}\n")
