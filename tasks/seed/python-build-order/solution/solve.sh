#!/bin/bash
# Reference solution: replace the recursive DFS by Kahn's algorithm with a min-heap (unique,
# alphabetical-first order), add target selection and the three error cases.
set -euo pipefail
cat > /app/tools/buildorder.py <<'PY'
#!/usr/bin/env python3
"""Print the order in which packages must be built (dependencies first).

usage: buildorder.py PACKAGES.json [TARGET ...]
"""
import heapq
import json
import sys


class BuildError(Exception):
    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


def load(path):
    with open(path) as f:
        return json.load(f)


def select(deps, targets):
    if not targets:
        return set(deps)
    for t in targets:
        if t not in deps:
            raise BuildError(f"unknown target {t}", 2)
    selected, stack = set(targets), list(targets)
    while stack:
        for d in deps[stack.pop()]:
            if d in deps and d not in selected:
                selected.add(d)
                stack.append(d)
    return selected


def build_order(packages, targets=None):
    deps = {name: set((info or {}).get("deps", [])) for name, info in packages.items()}
    selected = select(deps, targets)
    for name in sorted(selected):
        unknown = sorted(d for d in deps[name] if d not in deps)
        if unknown:
            raise BuildError(f"{name} depends on unknown package {unknown[0]}", 2)
    waiting = {name: len(deps[name]) for name in selected}
    users = {name: [] for name in selected}
    for name in selected:
        for d in deps[name]:
            users[d].append(name)
    ready = [name for name, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        name = heapq.heappop(ready)
        order.append(name)
        for user in users[name]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    if len(order) != len(selected):
        stuck = sorted(selected - set(order))
        raise BuildError("dependency cycle among: " + ", ".join(stuck), 3)
    return order


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 64
    try:
        order = build_order(load(argv[1]), argv[2:])
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.status
    sys.stdout.write("".join(name + "\n" for name in order))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
PY
python3 /app/tools/buildorder.py /app/tools/packages.json web
