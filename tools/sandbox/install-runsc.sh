#!/bin/sh
# runsc (gVisor), the sandboxes' second runtime (runtimes.py), pinned to Debian trixie's build.
# Why not bookworm's (0.0~20221219): it rejects statx with AT_NO_AUTOMOUNT, which bookworm's
# coreutils pass, so `ls` and `stat` fail with "Invalid argument" inside the sandbox. trixie's
# runsc is one static Go binary with no dependencies, so it installs on bookworm as it is (amd64).
# Run by `make system` as root. Idempotent: with that version installed it exits at once; a
# machine with bookworm's runsc (or none) gets it from the Debian archive its apt sources name.
set -eu
VERSION='0.0~20240729.0-4+b7'
SHA256=3c25a5130dfac2f71237d5baad56ac86a255de87a0400f11b36a555156dc325a
POOL=pool/main/g/golang-gvisor-gvisor

[ "$(dpkg-query -W -f '${Version}' runsc 2>/dev/null || true)" = "$VERSION" ] && exit 0

# The mirror: the URI of this machine's first Debian source for a release's own suite (not
# -security/-updates, whose archives hold no pool of this package), read from the deb822
# sources (URIs:/Suites:) or the one-line ones (deb [options] URI suite components).
mirror=$(
  for f in /etc/apt/sources.list.d/*.sources; do [ -r "$f" ] && cat "$f" && echo; done |
    awk '/^[ \t]*$/ { if (uri != "" && deb && main) { print uri; exit } uri = ""; deb = main = 0; next }
         tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
         tolower($1) == "uris:" { uri = $2 }
         tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i !~ /[-\/]/) main = 1 }
         END { if (uri != "" && deb && main) print uri }'
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    sed -e 's/\[[^]]*\]//' | awk '$1 == "deb" && $3 !~ /[-\/]/ { print $2 }'
)
mirror=$(printf '%s\n' "$mirror" | sed -n '1s,/*$,,p')
[ -n "$mirror" ] || { echo "install-runsc: no Debian mirror in this machine's apt sources" >&2; exit 1; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
chown _apt "$dir" 2>/dev/null || true  # apt's downloader drops root to _apt where it can
deb=$dir/runsc_${VERSION}_amd64.deb
echo "installing runsc $VERSION (Debian trixie's; bookworm's breaks ls/stat) from $mirror"
# apt's own downloader: the proxy and transports apt is configured with; it checks the hash.
/usr/lib/apt/apt-helper download-file "$mirror/$POOL/runsc_${VERSION}_amd64.deb" "$deb" "SHA256:$SHA256"
echo "$SHA256  $deb" | sha256sum -c --quiet
dpkg -i "$deb"
