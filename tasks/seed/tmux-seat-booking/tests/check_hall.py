"""Check /app/hall.txt against the hall the show started with (kept here, not in the image):
sold seats unchanged, and yours exactly the leftmost block of four in the row nearest the stage.
Prints PASS/FAIL lines; exit 0 only if all pass."""
import os
import sys

PATH = "/app/hall.txt"
START = ["XX..XX.X..", "...XX.X...", "X..B...XX.", "....XXX...", ".X........", "XX..X..BXX"]


def expected_block():
    for i, row in enumerate(START):
        for j in range(len(row) - 3):
            if "X" not in row[j:j + 4]:
                return {f"{chr(65 + i)}{j + k + 1}" for k in range(4)}
    raise AssertionError("no block of four")


def main():
    if os.path.islink(PATH) or not os.path.isfile(PATH) or os.path.getsize(PATH) > 1024:
        print(f"FAIL {PATH} is missing, not a regular file or too large")
        return 1
    with open(PATH, encoding="ascii", errors="replace") as f:
        hall = [line.rstrip("\n") for line in f if line.strip()]
    if len(hall) != len(START) or any(len(a) != len(b) for a, b in zip(hall, START)):
        print("FAIL the hall's shape changed")
        return 1
    ok = True
    sold = [(i, j) for i, row in enumerate(START) for j, s in enumerate(row) if s == "X"]
    if all(hall[i][j] == "X" for i, j in sold) and sum(r.count("X") for r in hall) == len(sold):
        print("PASS sold seats unchanged")
    else:
        print("FAIL sold seats changed")
        ok = False
    if any(set(row) - set(".XB") for row in hall):
        print("FAIL unknown seat marks")
        ok = False
    mine = {f"{chr(65 + i)}{j + 1}" for i, row in enumerate(hall) for j, s in enumerate(row)
            if s == "B"}
    want = expected_block()
    if mine == want:
        print(f"PASS yours: {' '.join(sorted(want))}")
    else:
        print(f"FAIL yours: {' '.join(sorted(mine)) or '-'} (expected four adjacent seats)")
        ok = False
    return 0 if ok else 1


sys.exit(main())
