"""Deterministic expense-claims export: python3 gen_expenses.py OUT.csv [SEED]."""
import csv
import datetime
import random
import sys

path = sys.argv[1]
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 31)
people = {
    "Engineering": ["Ana Costa", "Ben Okafor", "Chen Wei"],
    "Marketing": ["Dora Lind", "Emil Sauer"],
    "Operations": ["Farah Nasser", "Gus Moreau", "Hana Sato"],
    "Sales": ["Ivan Petrov", "Jade Brooks"],
}
categories = ["Travel", "Meals", "Software", "Hardware", "Training"]
with open(path, "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["date", "employee", "department", "category", "amount"])
    for _ in range(rng.randint(55, 70)):
        dept = rng.choice(sorted(people))
        day = datetime.date(2024, 4, 1) + datetime.timedelta(days=rng.randrange(91))
        amount = rng.randint(450, 180000) / 100
        if rng.random() < 0.08:
            amount = -amount  # a refund of an earlier claim
        w.writerow([day.strftime("%d/%m/%Y"), rng.choice(people[dept]), dept,
                    rng.choice(categories), f"{amount:.2f}"])
