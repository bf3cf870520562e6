"""Deterministic generator for /app/logs/access.log (seeded; same bytes on every build)."""
import random
import sys

rng = random.Random(20240310)
ips = [f"10.0.{rng.randint(0, 9)}.{rng.randint(1, 254)}" for _ in range(60)] + [
    f"203.0.113.{i}" for i in range(1, 25)
]
paths = ["/", "/index.html", "/login", "/logout", "/api/v1/items", "/api/v1/items/42",
         "/api/v1/orders", "/static/app.js", "/static/style.css", "/favicon.ico",
         "/search", "/admin", "/health"]
weights = [10, 8, 6, 2, 14, 5, 9, 12, 12, 7, 6, 1, 4]
methods = ["GET"] * 8 + ["POST"] * 2 + ["PUT", "DELETE"]
statuses = [200] * 40 + [201, 204, 301, 302, 304] * 2 + [400, 401, 403, 404, 404, 404] + [500, 502, 503]
agents = ["Mozilla/5.0 (X11; Linux x86_64)", "curl/7.88.1", "python-requests/2.31",
          "Mozilla/5.0 (Macintosh; Intel Mac OS X 13_4)", "Googlebot/2.1"]
months = ["Mar"]
out = []
t = 0
for i in range(2400):
    t += rng.randint(0, 40)
    day = 10 + t // 86400
    hh, mm, ss = (t % 86400) // 3600, (t % 3600) // 60, t % 60
    ip = rng.choice(ips)
    path = rng.choices(paths, weights)[0]
    if rng.random() < 0.15:
        path += f"?q={rng.randint(1, 999)}&page={rng.randint(1, 5)}"
    method = rng.choice(methods)
    status = rng.choice(statuses)
    size = "-" if status in (204, 304) else str(rng.randint(120, 90000))
    ref = rng.choice(["-", "https://example.com/", "https://example.com/search?q=x"])
    line = (f'{ip} - - [{day:02d}/Mar/2024:{hh:02d}:{mm:02d}:{ss:02d} +0000] '
            f'"{method} {path} HTTP/1.1" {status} {size} "{ref}" "{rng.choice(agents)}"')
    r = rng.random()
    if r < 0.012:
        line = line[: rng.randint(10, 60)]  # truncated write
    elif r < 0.02:
        line = rng.choice(["-- MARK --", "logrotate: rotated access.log", "\t", "GET / HTTP/1.1"])
    out.append(line)
sys.stdout.write("\n".join(out) + "\n")
