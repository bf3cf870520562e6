#!/usr/bin/env python3
"""settings-tui: a full-screen editor-settings menu (curses). Its state is saved only from its UI.

Keys: Up/Down pick a row; Left/Right change a choice or a number; Space toggles on/off;
Enter edits a text row (type, Enter to keep, Esc to cancel); s saves; q quits.
"""
import curses
import os
import sys

PATH = sys.argv[1] if len(sys.argv) > 1 else "/app/settings.conf"
ROWS = [
    ("theme", "choice", ["light", "dark", "solarized", "high-contrast"]),
    ("font_size", "number", (8, 32)),
    ("tab_width", "choice", ["2", "4", "8"]),
    ("line_numbers", "toggle", None),
    ("autosave", "toggle", None),
    ("telemetry", "toggle", None),
    ("username", "text", None),
    ("language", "choice", ["en", "de", "fr", "ja"]),
]


def load():
    values = {}
    with open(PATH, encoding="utf-8") as f:
        for line in f:
            if "=" in line and not line.startswith("#"):
                key, value = line.rstrip("\n").split("=", 1)
                values[key.strip()] = value.strip()
    return values


def save(values):
    tmp = PATH + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("# written by settings-tui\n")
        for key, _, _ in ROWS:
            f.write(f"{key} = {values[key]}\n")
    os.replace(tmp, PATH)


def change(values, row, step):
    key, kind, spec = ROWS[row]
    if kind == "choice":
        i = spec.index(values[key]) if values[key] in spec else 0
        values[key] = spec[(i + step) % len(spec)]
    elif kind == "number":
        lo, hi = spec
        values[key] = str(max(lo, min(hi, int(values[key]) + step)))
    elif kind == "toggle":
        values[key] = "off" if values[key] == "on" else "on"


def edit_text(scr, y, x, value):
    text = value
    curses.curs_set(1)
    while True:
        scr.addstr(y, x, (text + " " * 40)[:40], curses.A_UNDERLINE)
        scr.move(y, x + min(len(text), 39))
        ch = scr.get_wch()
        if ch in ("\n", "\r", curses.KEY_ENTER):
            curses.curs_set(0)
            return text
        if ch == "\x1b":
            curses.curs_set(0)
            return value
        if ch in (curses.KEY_BACKSPACE, "\x7f", "\b"):
            text = text[:-1]
        elif isinstance(ch, str) and ch.isprintable() and len(text) < 39:
            text += ch


def main(scr):
    curses.curs_set(0)
    values, row, status, dirty = load(), 0, "", False
    while True:
        scr.erase()
        scr.addstr(0, 0, " Editor settings ".center(60, "="), curses.A_BOLD)
        for i, (key, kind, _) in enumerate(ROWS):
            mark = ">" if i == row else " "
            shown = f"< {values[key]} >" if kind in ("choice", "number") else values[key]
            if kind == "toggle":
                shown = "[x]" if values[key] == "on" else "[ ]"
            attr = curses.A_REVERSE if i == row else curses.A_NORMAL
            scr.addstr(2 + i, 0, f"{mark} {key.replace('_', ' '):<14}", attr)
            scr.addstr(2 + i, 18, shown, attr)
        scr.addstr(3 + len(ROWS), 0, "Up/Down row  Left/Right change  Space toggle  Enter edit")
        scr.addstr(4 + len(ROWS), 0, "s save  q quit" + ("  (unsaved changes)" if dirty else ""))
        scr.addstr(6 + len(ROWS), 0, status[:59])
        ch = scr.get_wch()
        status = ""
        if ch == curses.KEY_UP:
            row = (row - 1) % len(ROWS)
        elif ch == curses.KEY_DOWN:
            row = (row + 1) % len(ROWS)
        elif ch in (curses.KEY_LEFT, curses.KEY_RIGHT):
            change(values, row, -1 if ch == curses.KEY_LEFT else 1)
            dirty = True
        elif ch == " " and ROWS[row][1] == "toggle":
            change(values, row, 1)
            dirty = True
        elif ch in ("\n", "\r", curses.KEY_ENTER) and ROWS[row][1] == "text":
            key = ROWS[row][0]
            new = edit_text(scr, 2 + row, 18, values[key])
            dirty = dirty or new != values[key]
            values[key] = new
        elif ch == "s":
            save(values)
            status, dirty = f"Saved to {PATH}", False
        elif ch == "q":
            if not dirty:
                return
            status = "Unsaved changes: press q again to quit without saving"
            scr.addstr(6 + len(ROWS), 0, status)
            if scr.get_wch() == "q":
                return


if __name__ == "__main__":
    curses.wrapper(main)
