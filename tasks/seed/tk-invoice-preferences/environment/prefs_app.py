#!/usr/bin/env python3
"""Invoice preferences: a small Tk window whose settings are saved only from its UI.

Fields: company name, payment terms in days, currency (EUR / USD / GBP), send reminders.
Tab moves between fields, Space toggles a check box or picks the focused currency, the Save
button (or Ctrl+S) writes /app/invoice_prefs.json, the Close button quits.
"""
import json
import os
import sys
import tkinter as tk

PATH = sys.argv[1] if len(sys.argv) > 1 else "/app/invoice_prefs.json"


def main():
    with open(PATH, encoding="utf-8") as f:
        prefs = json.load(f)
    root = tk.Tk()
    root.title("Invoice preferences")
    root.geometry("480x300+0+0")
    company = tk.StringVar(value=prefs["company"])
    terms = tk.StringVar(value=str(prefs["payment_terms_days"]))
    currency = tk.StringVar(value=prefs["currency"])
    reminders = tk.BooleanVar(value=prefs["send_reminders"])
    status = tk.StringVar(value="")

    tk.Label(root, text="Company name").grid(row=0, column=0, sticky="w", padx=8, pady=6)
    name_entry = tk.Entry(root, textvariable=company, width=30)
    name_entry.grid(row=0, column=1, columnspan=3, sticky="w")
    tk.Label(root, text="Payment terms (days)").grid(row=1, column=0, sticky="w", padx=8, pady=6)
    tk.Spinbox(root, from_=0, to=120, textvariable=terms, width=6).grid(row=1, column=1, sticky="w")
    tk.Label(root, text="Currency").grid(row=2, column=0, sticky="w", padx=8, pady=6)
    for i, code in enumerate(("EUR", "USD", "GBP")):
        tk.Radiobutton(root, text=code, value=code, variable=currency).grid(
            row=2, column=1 + i, sticky="w")
    tk.Checkbutton(root, text="Send payment reminders", variable=reminders).grid(
        row=3, column=0, columnspan=3, sticky="w", padx=8, pady=6)

    def save(_event=None):
        try:
            days = int(terms.get())
        except ValueError:
            status.set("Payment terms must be a whole number")
            return
        out = {"company": company.get(), "payment_terms_days": days,
               "currency": currency.get(), "send_reminders": bool(reminders.get()),
               "saved_by": "invoice-preferences"}
        tmp = PATH + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)
        os.replace(tmp, PATH)
        status.set("Saved")

    tk.Button(root, text="Save", command=save).grid(row=4, column=1, pady=10)
    tk.Button(root, text="Close", command=root.destroy).grid(row=4, column=2, pady=10)
    tk.Label(root, textvariable=status).grid(row=5, column=0, columnspan=4, sticky="w", padx=8)
    root.bind_all("<Control-s>", save)
    name_entry.focus_set()
    root.mainloop()


if __name__ == "__main__":
    main()
