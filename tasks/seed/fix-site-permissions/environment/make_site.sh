#!/bin/bash
# Create the web site tree with a deterministic mess of permissions: make_site.sh ROOT
set -euo pipefail
root=$1
mkdir -p "$root"
cd "$root"
mkdir -p public/css public/img public/uploads/2024 public/docs bin private/certs logs tmp
printf '<!doctype html>\n<title>Example</title>\n<h1>It works</h1>\n' > public/index.html
printf 'body { font-family: sans-serif; }\n' > public/css/style.css
printf 'h1 { color: #333; }\n' > public/css/print.css
printf '\x89PNG\r\n\x1a\n(fake image data)\n' > public/img/logo.png
printf 'user upload\n' > public/uploads/2024/report.pdf
printf '# Docs\n' > public/docs/README.md
printf '# Docs draft\n' > public/docs/README.md~
printf 'swap\n' > public/docs/.README.md.swp
printf '#!/bin/bash\necho deploying\n' > bin/deploy.sh
printf '#!/bin/bash\necho backing up\n' > bin/backup.sh
printf '#!/usr/bin/env python3\nprint("rotating")\n' > bin/rotate-logs
printf -- '-----BEGIN PRIVATE KEY-----\nMIIfake\n-----END PRIVATE KEY-----\n' > private/certs/server.key
printf -- '-----BEGIN CERTIFICATE-----\nMIIfake\n-----END CERTIFICATE-----\n' > private/certs/server.crt
printf 'DB_PASSWORD=hunter2\n' > private/db.env
printf 'DB_PASSWORD=old\n' > private/db.env.bak~
printf '127.0.0.1 - - "GET / HTTP/1.1" 200\n' > logs/access.log
printf 'cache\n' > tmp/session-1
ln -s public current
ln -s ../private/db.env bin/db.env
# the mess
chmod -R 777 .
chmod 4755 bin/backup.sh
chmod 2775 public/index.html
chmod 600 public/css/style.css
chmod 640 bin/deploy.sh
chmod 755 private/db.env
chmod 711 public/img
chmod 644 private/certs/server.crt
chmod 6777 tmp/session-1
