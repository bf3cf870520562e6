"""Check /app/lamps.txt against the target pattern (kept here, not read from the image).
Prints PASS/FAIL lines; exit 0 only if all pass."""
import os
import sys

PATH = "/app/lamps.txt"
TARGET = ["..##..", ".#..#.", "#....#", "######", "#....#", "#....#"]


def main():
    if os.path.islink(PATH) or not os.path.isfile(PATH) or os.path.getsize(PATH) > 1024:
        print(f"FAIL {PATH} is missing, not a regular file or too large")
        return 1
    with open(PATH, encoding="ascii", errors="replace") as f:
        got = f.read().split("\n")
    if got[-1:] == [""]:
        got = got[:-1]
    if len(got) != 6 or any(len(row) != 6 or set(row) - set("#.") for row in got):
        print("FAIL not six lines of six `#` / `.` (the app's format)")
        return 1
    ok = True
    for i, (row, want) in enumerate(zip(got, TARGET)):
        if row == want:
            print(f"PASS row {i + 1} {row}")
        else:
            print(f"FAIL row {i + 1}: expected {want}, got {row}")
            ok = False
    return 0 if ok else 1


sys.exit(main())
