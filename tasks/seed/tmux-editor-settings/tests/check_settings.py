"""Check /app/settings.conf: written by settings-tui (its header and key order), with the
requested values and the other settings unchanged. Prints PASS/FAIL lines; exit 0 only if all pass."""
import os
import sys

PATH = "/app/settings.conf"
KEYS = ["theme", "font_size", "tab_width", "line_numbers", "autosave", "telemetry", "username",
        "language"]
WANT = {"theme": "solarized", "font_size": "15", "tab_width": "4", "line_numbers": "on",
        "autosave": "on", "telemetry": "off", "username": "Ada Lovelace", "language": "de"}


def main():
    if os.path.islink(PATH) or not os.path.isfile(PATH) or os.path.getsize(PATH) > 4096:
        print(f"FAIL {PATH} is missing, not a regular file or too large")
        return 1
    with open(PATH, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    ok = True
    if not lines or lines[0] != "# written by settings-tui":
        print("FAIL the file was not saved by settings-tui (header line)")
        ok = False
    pairs = [line.split(" = ", 1) for line in lines[1:] if line.strip()]
    if [p[0] for p in pairs] != KEYS or any(len(p) != 2 for p in pairs):
        print("FAIL the settings are not in the program's format and order")
        return 1
    got = dict(pairs)
    for key in KEYS:
        if got[key] == WANT[key]:
            print(f"PASS {key} = {WANT[key]}")
        else:
            print(f"FAIL {key}: expected {WANT[key]!r}, got {got[key]!r}")
            ok = False
    return 0 if ok else 1


sys.exit(main())
