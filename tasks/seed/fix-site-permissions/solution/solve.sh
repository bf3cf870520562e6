#!/bin/bash
# Reference solution: delete leftovers, then apply the generic modes and the exceptions, never
# following symlinks (find -type only matches real files/directories).
set -euo pipefail
cd /app/site
find . -type f \( -name '*~' -o -name '.*.swp' \) -print -delete
find . -type d -exec chmod 0755 {} +
find . -type f -exec chmod 0644 {} +
find bin -maxdepth 1 -type f -exec chmod 0755 {} +
find private -type d -exec chmod 0700 {} +
find private -type f -exec chmod 0600 {} +
chmod 1777 tmp
find . -printf '%m %y %p\n' | sort -k3
