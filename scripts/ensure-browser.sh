#!/usr/bin/env bash
# The report test opens report.html in a real headless browser: Debian's chromium. Install it
# when it is missing (needs root and a package mirror); otherwise say what to do.
set -euo pipefail
for candidate in "${TXN_AUDIT_CHROMIUM:-}" chromium chromium-browser; do
  if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1; then exit 0; fi
done
"$(dirname "$0")/apt-install.sh" "the report test (it opens report.html in Chromium) needs" \
  "or point TXN_AUDIT_CHROMIUM at a Chromium binary" chromium
command -v chromium >/dev/null 2>&1 || { echo "error: chromium was installed but is not on PATH" >&2; exit 2; }
