"""Deterministic generator for rotated application logs: app.log.2.gz (oldest), app.log.1, app.log."""
import datetime
import gzip
import os
import random
import sys

outdir = sys.argv[1]
os.makedirs(outdir, exist_ok=True)
rng = random.Random(77)
loggers = ["worker.process", "api.orders", "api.auth", "db.pool", "billing.invoice", "scheduler"]
tracebacks = [
    ["  File \"/srv/app/worker.py\", line 88, in process", "    result = handler(payload)",
     "  File \"/srv/app/handlers.py\", line 21, in handle", "    qty = int(payload['qty'])",
     "ValueError: invalid literal for int() with base 10: 'abc'"],
    ["  File \"/srv/app/api/orders.py\", line 140, in get_order", "    return ORDERS[order_id]",
     "KeyError: 'ord-0042'"],
    ["  File \"/srv/app/db/pool.py\", line 51, in acquire", "    conn = self._connect()",
     "  File \"/srv/app/db/pool.py\", line 33, in _connect",
     "    raise TimeoutError('pool exhausted: 20/20 in use')",
     "TimeoutError: pool exhausted: 20/20 in use"],
    ["  File \"/srv/app/billing/invoice.py\", line 12, in total",
     "    return sum(l.amount for l in lines) / count", "ZeroDivisionError: division by zero"],
    ["  File \"/srv/app/clients/http.py\", line 77, in fetch", "    resp = session.get(url, timeout=5)",
     "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='pay.example', port=443): Max retries exceeded"],
    # chained exception: the reported type is the final one
    ["  File \"/srv/app/api/auth.py\", line 30, in verify", "    claims = jwt.decode(token)",
     "jwt.exceptions.DecodeError: Not enough segments", "",
     "During handling of the above exception, another exception occurred:", "",
     "Traceback (most recent call last):", "  File \"/srv/app/api/auth.py\", line 34, in verify",
     "    raise PermissionError('bad token')", "PermissionError: bad token"],
    ["  File \"/srv/app/scheduler.py\", line 9, in loop", "    time.sleep(interval)", "KeyboardInterrupt"],
]
t = datetime.datetime(2024, 5, 2, 8, 0, 0)
events = []
for i in range(900):
    t += datetime.timedelta(milliseconds=rng.randint(50, 20000))
    stamp = t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"
    rid = rng.choice(["-"] + [f"req-{rng.randrange(16**4):04x}" for _ in range(3)])
    logger = rng.choice(loggers)
    r = rng.random()
    cont = []
    if r < 0.08:
        level = rng.choice(["ERROR", "ERROR", "ERROR", "CRITICAL"])
        msg = rng.choice(["job failed", "unhandled exception", "request failed", "task crashed"])
        cont = ["Traceback (most recent call last):"] + rng.choice(tracebacks)
    elif r < 0.11:
        level = "ERROR"
        msg = rng.choice(["upstream returned 502", "retry budget exhausted for job"])
        if rng.random() < 0.5:  # multi-line error message without a traceback
            cont = ["  upstream: pay.example:443", "  attempts: 5"]
    elif r < 0.2:
        level = "WARNING"
        msg = rng.choice(["slow query 2.3s", "deprecated endpoint used", "Traceback suppressed for job"])
    elif r < 0.25:
        level = "INFO"
        msg = "payload:"
        cont = ["  {\"order\": \"ord-%04d\", \"qty\": %d}" % (rng.randint(1, 9999), rng.randint(1, 9)),
                "  ValueError: this is data, not an exception"]
    else:
        level = rng.choice(["INFO", "INFO", "DEBUG"])
        msg = rng.choice(["started job %d" % rng.randint(1, 999), "GET /api/v1/orders 200",
                          "cache hit", "heartbeat"])
    events.append("\n".join([f"{stamp} {level} [{rid}] {logger}: {msg}"] + cont) + "\n")
parts = [events[:300], events[300:620], events[620:]]
with gzip.GzipFile(os.path.join(outdir, "app.log.2.gz"), "wb", mtime=0) as f:
    f.write("".join(parts[0]).encode())
with open(os.path.join(outdir, "app.log.1"), "w") as f:
    f.write("".join(parts[1]))
with open(os.path.join(outdir, "app.log"), "w") as f:
    f.write("".join(parts[2]))
