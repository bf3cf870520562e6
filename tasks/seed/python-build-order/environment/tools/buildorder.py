#!/usr/bin/env python3
"""Print the order in which packages must be built (dependencies first).

usage: buildorder.py PACKAGES.json [TARGET ...]
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def build_order(packages, targets=None):
    order = []
    seen = set()

    def visit(name):
        if name in seen:
            return
        for dep in packages[name].get("deps", []):
            visit(dep)
        seen.add(name)
        order.append(name)

    for name in packages:
        visit(name)
    return order


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 64
    packages = load(argv[1])
    for name in build_order(packages, argv[2:] or None):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
