#!/usr/bin/env python3
"""seats-tui: a full-screen seat map (curses) for one show. Bookings are saved only from its UI.

The hall is /app/hall.txt: one line per row (A first), one character per seat:
`.` free, `X` sold to someone else, `B` booked by you. Keys: arrows move the cursor;
Space books a free seat or releases one of yours; w writes the hall back; q quits.
"""
import curses
import os
import sys

PATH = sys.argv[1] if len(sys.argv) > 1 else "/app/hall.txt"


def load():
    with open(PATH, encoding="ascii") as f:
        return [list(line.strip()) for line in f if line.strip()]


def write(hall):
    tmp = PATH + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write("".join(f"{''.join(row)}\n" for row in hall))
    os.replace(tmp, PATH)


def main(scr):
    curses.curs_set(0)
    hall, r, c, status = load(), 0, 0, ""
    rows, cols = len(hall), len(hall[0])
    while True:
        scr.erase()
        scr.addstr(0, 0, " Seat map: Friday 20:00 ".center(48, "="), curses.A_BOLD)
        scr.addstr(1, 4, "".join(f"{n:>3}" for n in range(1, cols + 1)))
        for i, row in enumerate(hall):
            scr.addstr(2 + i, 0, f" {chr(65 + i)}  ")
            for j, seat in enumerate(row):
                attr = curses.A_REVERSE if (i, j) == (r, c) else curses.A_NORMAL
                scr.addstr(2 + i, 4 + 3 * j, f" {seat} ", attr)
        mine = [f"{chr(65 + i)}{j + 1}" for i, row in enumerate(hall)
                for j, seat in enumerate(row) if seat == "B"]
        scr.addstr(3 + rows, 0, f"cursor: {chr(65 + r)}{c + 1}   yours: {' '.join(mine) or '-'}")
        scr.addstr(4 + rows, 0, ". free  X sold  B yours | arrows move  Space book/release")
        scr.addstr(5 + rows, 0, "w write  q quit")
        scr.addstr(7 + rows, 0, status[:47])
        ch = scr.get_wch()
        status = ""
        if ch == curses.KEY_UP:
            r = max(0, r - 1)
        elif ch == curses.KEY_DOWN:
            r = min(rows - 1, r + 1)
        elif ch == curses.KEY_LEFT:
            c = max(0, c - 1)
        elif ch == curses.KEY_RIGHT:
            c = min(cols - 1, c + 1)
        elif ch == " ":
            seat = hall[r][c]
            if seat == "X":
                status = f"{chr(65 + r)}{c + 1} is sold"
            else:
                hall[r][c] = "." if seat == "B" else "B"
        elif ch == "w":
            write(hall)
            status = f"Written to {PATH}"
        elif ch == "q":
            return


if __name__ == "__main__":
    curses.wrapper(main)
