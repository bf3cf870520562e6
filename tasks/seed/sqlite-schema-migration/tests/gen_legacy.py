"""Deterministic legacy database: python3 gen_legacy.py PATH."""
import datetime
import random
import sqlite3
import sys

rng = random.Random(8080)
db = sqlite3.connect(sys.argv[1])
db.executescript("""
CREATE TABLE users (id INTEGER PRIMARY KEY, full_name TEXT, email TEXT, created TEXT, is_admin TEXT);
CREATE TABLE posts (id INTEGER PRIMARY KEY, user_email TEXT, title TEXT, body TEXT);
""")
firsts = ["Alice", "Bob", "Carla", "Deniz", "Emeka", "Fatima", "Goran", "Hana", "Ivo", "Jun", "Mary Ann", "Li"]
lasts = ["Nguyen", "Okafor", "Schmidt", "van der Berg", "Rossi", "Kowalski", "", "Tanaka", "de la Cruz"]
people = []
for i in range(45):
    f, l = rng.choice(firsts), rng.choice(lasts)
    people.append((f"{f} {l}".strip(), f"{f.split()[0].lower()}.{(l or 'x').replace(' ', '').lower()}{i}@example.org"))
uid = 0
emails = []
for name, email in people:
    copies = 1 if rng.random() < 0.75 else rng.randint(2, 3)  # signed up more than once
    for _ in range(copies):
        uid += rng.randint(1, 3)
        d = datetime.date(2021, 1, 1) + datetime.timedelta(days=rng.randrange(900))
        fmt = rng.choice(["iso", "iso", "dmy", "epoch", "isotime"])
        if fmt == "iso":
            created = d.isoformat()
        elif fmt == "dmy":
            created = d.strftime("%d/%m/%Y")
        elif fmt == "epoch":
            created = str(int(datetime.datetime(d.year, d.month, d.day, rng.randint(0, 23), 5,
                                                tzinfo=datetime.timezone.utc).timestamp()))
        else:
            created = d.isoformat() + f" {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00"
        shown = rng.choice([email, email, email.upper(), " " + email + " ", email.capitalize()])
        spaced = name if rng.random() < 0.8 else "  " + name.replace(" ", "   ") + " "
        admin = rng.choice(["no", "no", "no", "0", "false", "N", "yes", "1", "true", "Y"])
        db.execute("INSERT INTO users VALUES (?,?,?,?,?)", (uid, spaced, shown, created, admin))
        emails.append(shown)
pid = 100
for _ in range(160):
    pid += 1
    if rng.random() < 0.06:
        author = f"ghost{rng.randint(1, 9)}@example.org"  # account deleted long ago
    else:
        author = rng.choice(emails)
        author = rng.choice([author, author.strip().lower(), author.upper()])
    db.execute("INSERT INTO posts VALUES (?,?,?,?)", (pid, author, f"Post {pid}", f"Body of post {pid}."))
db.commit()
