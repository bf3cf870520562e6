#!/bin/bash
# Reference solution: a script that deletes leftovers, then applies the generic modes and the
# exceptions, never following symlinks (find -type only matches real files/directories).
set -euo pipefail
cat > /app/fix_perms.sh <<'SCRIPT'
#!/bin/bash
set -euo pipefail
cd "$1"
find . -type f \( -name '*~' -o -name '.*.swp' \) -delete
find . -type d -exec chmod 0755 {} +
find . -type f -exec chmod 0644 {} +
find bin -maxdepth 1 -type f -exec chmod 0755 {} +
find private -type d -exec chmod 0700 {} +
find private -type f -exec chmod 0600 {} +
chmod 1777 tmp
SCRIPT
chmod +x /app/fix_perms.sh
/app/fix_perms.sh /app/site
find /app/site -printf '%m %y %p\n' | sort -k3
