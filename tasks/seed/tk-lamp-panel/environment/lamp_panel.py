#!/usr/bin/env python3
"""Lamp panel: a Tk window with a 6 x 6 grid of lamps; its state is saved only from its UI.

Clicking a lamp switches it on or off. The "Save" button writes /app/lamps.txt: six lines of
six characters, `#` on and `.` off, top row first. The window is 400 x 460 pixels; each lamp
is a 60 x 60 square, the grid starting 20 pixels from the window's left and top edges.
"""
import os
import sys
import tkinter as tk

PATH = sys.argv[1] if len(sys.argv) > 1 else "/app/lamps.txt"
SIZE, EDGE, N = 60, 20, 6


def main():
    with open(PATH, encoding="ascii") as f:
        state = [[ch == "#" for ch in line.strip()] for line in f if line.strip()]
    root = tk.Tk()
    root.title("Lamp panel")
    root.geometry("400x460+0+0")
    canvas = tk.Canvas(root, width=400, height=400, highlightthickness=0, bg="#202020")
    canvas.place(x=0, y=0)
    status = tk.StringVar(value="")
    cells = {}

    def paint(r, c):
        canvas.itemconfigure(cells[r, c], fill="#ffd23f" if state[r][c] else "#404040")

    for r in range(N):
        for c in range(N):
            x, y = EDGE + c * SIZE, EDGE + r * SIZE
            cells[r, c] = canvas.create_rectangle(x + 4, y + 4, x + SIZE - 4, y + SIZE - 4,
                                                  outline="#000000")
            paint(r, c)

    def click(event):
        c, r = (event.x - EDGE) // SIZE, (event.y - EDGE) // SIZE
        if 0 <= r < N and 0 <= c < N and event.x >= EDGE and event.y >= EDGE:
            state[r][c] = not state[r][c]
            paint(r, c)
            status.set(f"lamp row {r + 1} column {c + 1}: {'on' if state[r][c] else 'off'}")

    def save():
        tmp = PATH + ".tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write("".join("".join("#" if on else "." for on in row) + "\n" for row in state))
        os.replace(tmp, PATH)
        status.set("Saved")

    canvas.bind("<Button-1>", click)
    tk.Button(root, text="Save", command=save).place(x=20, y=410)
    tk.Label(root, textvariable=status).place(x=100, y=414)
    root.mainloop()


if __name__ == "__main__":
    main()
