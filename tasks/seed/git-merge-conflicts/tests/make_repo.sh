#!/bin/bash
# Build the service repository deterministically: a common base, then diverging work on
# main and feature/rate-limit that conflicts textually (config, changelog) and semantically
# (main calls an API that the feature branch changes).
set -euo pipefail
dir=$1
mkdir -p "$dir" && cd "$dir"
export GIT_AUTHOR_NAME="Sam Ops" GIT_AUTHOR_EMAIL="sam@example.com"
export GIT_COMMITTER_NAME="Sam Ops" GIT_COMMITTER_EMAIL="sam@example.com"
n=0
commit() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="@$((1714000000 + n * 3600)) +0000" GIT_COMMITTER_DATE="@$((1714000000 + n * 3600)) +0000"
  git add -A && git commit -q -m "$1"
}
git init -q -b main .
git config user.name "Sam Ops"; git config user.email "sam@example.com"
mkdir -p app config tests
: > app/__init__.py
: > tests/__init__.py
cat > app/ratelimit.py <<'PY'
"""Sliding-window rate limiter (window fixed at one second)."""


class RateLimiter:
    def __init__(self, limit):
        self.limit = limit
        self.calls = []

    def allow(self, now):
        self.calls = [t for t in self.calls if now - t < 1.0]
        if len(self.calls) < self.limit:
            self.calls.append(now)
            return True
        return False
PY
cat > config/settings.ini <<'INI'
[server]
host = 0.0.0.0
port = 8080
timeout = 30
workers = 4

[database]
url = sqlite:///var/lib/service/app.db
pool_size = 5

[logging]
level = info
INI
cat > CHANGELOG.md <<'MD'
# Changelog

## Unreleased

## 1.2.0
- Initial public release
MD
commit "Base service layout"

git checkout -q -b feature/rate-limit
cat > app/ratelimit.py <<'PY'
"""Sliding-window rate limiter with a configurable window."""


class RateLimiter:
    def __init__(self, limit, window):
        if limit < 1 or window <= 0:
            raise ValueError("limit must be >= 1 and window > 0")
        self.limit = limit
        self.window = window
        self.calls = []

    def try_acquire(self, now):
        """Record a call at time `now` if the window has room; return whether it was allowed."""
        self.calls = [t for t in self.calls if now - t < self.window]
        if len(self.calls) < self.limit:
            self.calls.append(now)
            return True
        return False
PY
cat > tests/test_ratelimit.py <<'PY'
import unittest

from app.ratelimit import RateLimiter


class RateLimiterTest(unittest.TestCase):
    def test_limit_within_window(self):
        rl = RateLimiter(2, 10.0)
        self.assertEqual([rl.try_acquire(0.0), rl.try_acquire(1.0), rl.try_acquire(2.0)], [True, True, False])
        self.assertTrue(rl.try_acquire(10.5))

    def test_rejects_bad_arguments(self):
        with self.assertRaises(ValueError):
            RateLimiter(0, 1.0)
        with self.assertRaises(ValueError):
            RateLimiter(1, 0)
PY
sed -i 's/^timeout = 30$/timeout = 20\nrate_limit = 100\nrate_window = 1.0/' config/settings.ini
sed -i 's/^## Unreleased$/## Unreleased\n- RateLimiter: configurable window, new try_acquire() API/' CHANGELOG.md
commit "ratelimit: configurable window, try_acquire API"

git checkout -q main
cat > app/server.py <<'PY'
"""Request handling: answers 429 when the client exceeds its request rate."""
from app.ratelimit import RateLimiter


def make_limiter(limit):
    """A limiter allowing `limit` requests per one-second window."""
    return RateLimiter(limit)


def handle(limiter, now):
    return 200 if limiter.allow(now) else 429
PY
cat > tests/test_server.py <<'PY'
import unittest

from app.server import handle, make_limiter


class ServerTest(unittest.TestCase):
    def test_429_after_limit(self):
        lim = make_limiter(2)
        self.assertEqual([handle(lim, 0.0), handle(lim, 0.1), handle(lim, 0.2)], [200, 200, 429])

    def test_window_is_one_second(self):
        lim = make_limiter(1)
        self.assertEqual(handle(lim, 0.0), 200)
        self.assertEqual(handle(lim, 0.9), 429)
        self.assertEqual(handle(lim, 1.05), 200)
PY
sed -i 's/^timeout = 30$/timeout = 45/' config/settings.ini
printf 'format = json\n' >> config/settings.ini
sed -i 's/^## Unreleased$/## Unreleased\n- Add request handler that answers 429 over the rate limit (server.py)/' CHANGELOG.md
commit "Add request handler with rate limiting"
