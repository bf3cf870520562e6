"""Build /app/kvtool/src/*.c with hardening and compare kvget against a Python reference."""
import glob
import os
import random
import subprocess
import sys
import tempfile

WORK = tempfile.mkdtemp()
BIN = os.path.join(WORK, "kvget")
ENV = dict(os.environ, MALLOC_CHECK_="3", MALLOC_PERTURB_="165")


def reference(text):
    entries, section = {}, ""
    for raw in text.split("\n"):
        s = raw.strip(" \t\r\n\v\f")
        if not s or s[0] in "#;":
            continue
        if s[0] == "[":
            if "]" in s:
                section = s[1:s.index("]")].strip(" \t\r\n\v\f")
            continue
        if "=" in s:
            k, v = s.split("=", 1)
            entries[(section, k.strip(" \t\r\n\v\f"))] = v.strip(" \t\r\n\v\f")  # dict keeps first position
    return entries


def dump(entries):
    return "".join(f"{s}.{k}={v}\n" if s else f"{k}={v}\n" for (s, k), v in entries.items())


def kvget(path, *args):
    return subprocess.run([BIN, path, *args], capture_output=True, text=True, env=ENV, timeout=20)


def case(name, text, queries):
    path = os.path.join(WORK, name + ".ini")
    with open(path, "w") as f:
        f.write(text)
    entries = reference(text)
    p = kvget(path)
    if p.returncode != 0 or p.stdout != dump(entries):
        exp = dump(entries)
        print(f"FAIL [{name}] dump: exit={p.returncode} stderr={p.stderr[-300:]!r}\n"
              f"  got {len(p.stdout)} chars / want {len(exp)}; got head {p.stdout[:200]!r}\n  want head {exp[:200]!r}")
        return False
    for q in queries:
        sec, _, key = q.partition(".") if "." in q else ("", "", q)
        p = kvget(path, q)
        if (sec, key) in entries:
            ok = p.returncode == 0 and p.stdout == entries[(sec, key)] + "\n"
        else:
            ok = p.returncode == 1 and p.stdout == "" and f"kvget: {q} not found" in p.stderr
        if not ok:
            print(f"FAIL [{name}] query {q[:80]!r}: exit={p.returncode} stdout={p.stdout[:120]!r} "
                  f"stderr={p.stderr[-200:]!r} want={entries.get((sec, key), '<not found>')[:120]!r}")
            return False
    print(f"PASS [{name}] ({len(entries)} entries, {len(queries)} queries)")
    return True


def main():
    srcs = glob.glob("/app/kvtool/src/*.c")
    build = subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-D_FORTIFY_SOURCE=2", "-fstack-protector-strong",
                            "-o", BIN, *srcs], capture_output=True, text=True)
    if build.returncode != 0:
        print(f"FAIL: build\n{build.stderr[-2000:]}")
        return False
    print("PASS: build")
    rng = random.Random(99)
    cases = []
    example = open("/app/kvtool/example.ini").read() if os.path.exists("/app/kvtool/example.ini") else ""
    cases.append(("example", "# example configuration\nname = demo\n\n[server]\nhost = 0.0.0.0\nport = 8080\n\n"
                  "[database]\nurl = postgres://app@db/app?sslmode=require\npool = 5\n",
                  ["name", "server.port", "server.host", "database.url", "database.pool", "server.por",
                   "server.portal", "database", "nosuch.key", "port"]))
    if example:
        cases.append(("example-file", example, ["name", "server.port", "database.url"]))
    long_val = "".join(rng.choice("abcdefghij0123456789=/:") for _ in range(20000))
    long_sec = "section_" + "x" * 300
    cases.append(("long-lines",
                  f"[{long_sec}]\nkey = {long_val}\n{'k' * 500} = short\n\n[small]\n  a  =  1  \n"
                  f"b = {long_val[:4000]}\n   \n\t\nempty =\n  spaced = a = b = c  \n; comment = no\n",
                  [f"{long_sec}.key", f"{long_sec}.{'k' * 500}", "small.a", "small.b", "small.empty",
                   "small.spaced", "small.comment", f"{long_sec[:40]}.key", "x" * 1000 + ".y"]))
    lines, queries = ["top = level", "other=1"], ["top", "other"]
    for s in range(60):
        lines.append(f"[ sec{s} ] trailing text is ignored")
        for k in range(40):
            lines.append(f"key{k} = value-{s}-{k}-{rng.randint(0, 10**9)}")
        if s % 7 == 0:
            lines.append(f"key3 = replaced-{s}")  # duplicate: later value wins, first position kept
            lines.append("not an entry line")
        queries += [f"sec{s}.key{rng.randint(0, 39)}", f"sec{s}.key3"]
    lines.append("[sec5]")
    lines.append("key0 = reopened section")
    lines.append("late = added")
    queries += ["sec5.key0", "sec5.late", "sec5.key", "sec5.key00", "sec60.key1"]
    cases.append(("many-entries", "\r\n".join(lines) + "\r\n", queries))
    for name, text, qs in cases:
        try:
            if not case(name, text, qs):
                return False
        except subprocess.TimeoutExpired:
            print(f"FAIL [{name}]: timed out")
            return False
    return True


sys.exit(0 if main() else 1)
