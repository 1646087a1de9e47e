#!/usr/bin/env bash
# The report test opens report.html in a real headless browser: Debian's chromium. Install it
# when it is missing (needs root and a package mirror); otherwise say what to do.
set -euo pipefail
for candidate in "${TXN_AUDIT_CHROMIUM:-}" chromium chromium-browser; do
  if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1; then exit 0; fi
done
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "error: the report test needs Chromium; install it (Debian/Ubuntu: apt-get install chromium)" \
       "or point TXN_AUDIT_CHROMIUM at a Chromium binary" >&2
  exit 2
fi
echo "installing chromium (the report test opens report.html in it)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
command -v chromium >/dev/null 2>&1 || { echo "error: chromium was installed but is not on PATH" >&2; exit 2; }
