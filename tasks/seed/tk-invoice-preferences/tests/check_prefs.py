"""Check /app/invoice_prefs.json: saved by the app (its keys, exactly) with the requested values.
Prints PASS/FAIL lines; exit 0 only if all pass."""
import json
import os
import sys

PATH = "/app/invoice_prefs.json"
WANT = {"company": "Nordlicht Design GmbH", "payment_terms_days": 14, "currency": "GBP",
        "send_reminders": True, "saved_by": "invoice-preferences"}


def main():
    if os.path.islink(PATH) or not os.path.isfile(PATH) or os.path.getsize(PATH) > 4096:
        print(f"FAIL {PATH} is missing, not a regular file or too large")
        return 1
    try:
        with open(PATH, encoding="utf-8") as f:
            got = json.load(f)
    except ValueError as exc:
        print(f"FAIL not JSON: {exc}")
        return 1
    if not isinstance(got, dict) or sorted(got) != sorted(WANT):
        print("FAIL not the app's format (its keys)")
        return 1
    ok = True
    for key, want in WANT.items():
        if got[key] == want and type(got[key]) is type(want):
            print(f"PASS {key} = {want!r}")
        else:
            print(f"FAIL {key}: expected {want!r}, got {got[key]!r}")
            ok = False
    return 0 if ok else 1


sys.exit(main())
