"""Deterministic staff rota (local Berlin times, across the March DST change):
python3 gen_rota.py OUT.csv."""
import csv
import datetime
import random
import sys

rng = random.Random(331)
people = ["Aylin Demir", "Bruno Keller", "Clara Vogt", "Deniz Yilmaz", "Elke Brandt"]
sites = ["Depot North, Gate 2", "Depot South", "Head Office; Room 4"]
shifts = [("06:00", "14:00"), ("14:00", "22:00"), ("22:00", "06:00"), ("09:30", "17:45"),
          ("01:00", "09:00")]
rows = []
for n in range(46):
    day = datetime.date(2024, 3, 25) + datetime.timedelta(days=rng.randrange(14))
    start, end = rng.choice(shifts)
    status = rng.choices(["confirmed", "tentative", "cancelled"], [7, 2, 1])[0]
    rows.append([f"S{1000 + n}", rng.choice(people), day.isoformat(), start, end,
                 rng.choice(sites), status])
rows.append(["S1046", "Clara Vogt", "2024-03-30", "22:00", "06:00", "Depot South", "confirmed"])
rows.append(["S1047", "Elke Brandt", "2024-03-31", "01:00", "09:00", "Depot North, Gate 2", "tentative"])
with open(sys.argv[1], "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["shift_id", "employee", "date", "start", "end", "location", "status"])
    w.writerows(rows)
