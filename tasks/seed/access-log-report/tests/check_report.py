"""Recompute the expected report from a fresh copy of the log and score /app/report.json."""
import collections
import json
import re
import subprocess

LINE = re.compile(r'(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) (\S+)" (\d{3}) (\d+|-) "([^"]*)" "([^"]*)"')
REWARD = "/logs/verifier/reward.txt"


def expected():
    # Regenerate the log from the seeded generator so an edited /app/logs/access.log cannot help.
    text = subprocess.run(["python3", "/tests/gen_log.py"], capture_output=True, text=True, check=True).stdout
    lines = text.split("\n")[:-1]
    valid = [m for m in (LINE.fullmatch(l) for l in lines) if m]
    statuses = collections.Counter(m.group(6) for m in valid)
    paths = collections.Counter(m.group(4).split("?", 1)[0] for m in valid)
    top = sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    errors = sum(1 for m in valid if int(m.group(6)) >= 500)
    return {
        "total_requests": len(valid),
        "malformed_lines": len(lines) - len(valid),
        "status_counts": dict(statuses),
        "top_paths": [{"path": p, "count": c} for p, c in top],
        "unique_ips": len({m.group(1) for m in valid}),
        "error_rate": round(errors / len(valid), 4),
    }


def main():
    exp = expected()
    try:
        with open("/app/report.json") as f:
            got = json.load(f)
        assert isinstance(got, dict), "top level is not an object"
    except Exception as e:  # missing or unparsable report scores 0
        print(f"FAIL: cannot read /app/report.json: {e}")
        return 0.0
    if set(got) != set(exp):
        print(f"note: keys are {sorted(got)}, want exactly {sorted(exp)}")
    checks = {
        "exact key set, total_requests and malformed_lines": lambda: (
            set(got) == set(exp)
            and type(got.get("total_requests")) is int and type(got.get("malformed_lines")) is int
            and got["total_requests"] == exp["total_requests"]
            and got["malformed_lines"] == exp["malformed_lines"]),
        "status_counts": lambda: got.get("status_counts") == exp["status_counts"]
            and all(type(v) is int for v in got["status_counts"].values()),
        "top_paths": lambda: got.get("top_paths") == exp["top_paths"],
        "unique_ips": lambda: type(got.get("unique_ips")) is int and got["unique_ips"] == exp["unique_ips"],
        "error_rate": lambda: isinstance(got.get("error_rate"), (int, float))
            and not isinstance(got.get("error_rate"), bool)
            and abs(got["error_rate"] - exp["error_rate"]) < 1e-9,
    }
    passed = 0
    for name, fn in checks.items():
        ok = bool(fn())
        passed += ok
        key = name.split(" ")[-1] if name.startswith("exact") else name.split(" ")[0]
        print(f"{'PASS' if ok else 'FAIL'}: {name}" + ("" if ok else f" (got {got.get(key)!r}, want {exp[key]!r})"))
    return passed / len(checks)


if __name__ == "__main__":
    reward = main()
    print(f"reward = {reward}")
    with open(REWARD, "w") as f:
        f.write(f"{reward}\n")
