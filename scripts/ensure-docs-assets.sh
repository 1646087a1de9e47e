#!/usr/bin/env bash
# The Data Docs' styles, fonts and scripts (Bootstrap, Font Awesome, jQuery, ...): npm packages
# pinned in tools/datadocs/package-lock.json, installed with `npm ci` into a temporary folder and
# their few files copied into txn_audit/quality/vendor/ (txn_audit.quality.assets), which every
# scan bundles with its Data Docs. Run again only when the lock file is newer than the copy.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${VENV:-$root/.venv}"
PY="${PY:-$VENV/bin/python}"
lock="$root/tools/datadocs/package-lock.json"
stamp="$root/txn_audit/quality/vendor/.installed"

if [ -f "$stamp" ] && [ "$stamp" -nt "$lock" ]; then exit 0; fi
if ! command -v npm >/dev/null 2>&1; then
  "$root/scripts/apt-install.sh" "the Data Docs' styles and icons come from the npm registry, which needs" "" npm
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/txn-audit-docs-assets.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$root/tools/datadocs/package.json" "$lock" "$work/"
echo "installing the Data Docs assets (npm ci, tools/datadocs)" >&2
(cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
(cd "$root" && "$PY" -c 'import sys; from txn_audit.quality.assets import main; raise SystemExit(main(sys.argv[1:]))' "$work/node_modules")
touch "$stamp"
