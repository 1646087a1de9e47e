#!/usr/bin/env bash
# Build the executor environment: txn_audit and its runtime dependencies (not the dev extra),
# installed from a wheel of this project into a fresh virtual environment and packed by
# venv-pack, for
#   spark-submit --archives dist/txn-audit-executor-env.tar.gz#environment \
#       --conf spark.pyspark.python=./environment/bin/python ...
#
#   scripts/build-executor-env.sh [OUT]      OUT defaults to dist/txn-audit-executor-env.tar.gz
#
# OUT is rebuilt only when it is missing or pyproject.toml, a file of txn_audit/ or this script
# is newer than it (FORCE=1 rebuilds anyway); it is written under a temporary name and renamed,
# so a reader never sees half an archive. PYTHON (default python3) is the interpreter the
# environment is made from: its version must be the driver's, and its path must exist on every
# node (venv-pack packs site-packages and the scripts, and links bin/python to that path;
# `python -m venv --copies` would not help: it copies the executable, not the standard library).
# PYTHON_PREFIX relinks bin/python to PYTHON_PREFIX/bin/python3.X, the nodes' interpreter.
# venv-pack comes from the project's environment (VENV, default .venv; VENV_PACK names another).
set -euo pipefail
self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
root="$(dirname "$(dirname "$self")")"
OUT="${1:-$root/dist/txn-audit-executor-env.tar.gz}"
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-$root/.venv}"
VENV_PACK="${VENV_PACK:-$VENV/bin/venv-pack}"

newer_sources() {
  find "$root/pyproject.toml" "$root/txn_audit" "$self" -newer "$OUT" -not -path '*/__pycache__*' -print -quit
}
if [ "${FORCE:-0}" != 1 ] && [ -f "$OUT" ] && [ -z "$(newer_sources)" ]; then
  echo "$OUT is up to date" >&2; exit 0
fi
if [ ! -x "$VENV_PACK" ]; then
  echo "error: venv-pack not found at $VENV_PACK: run \`make env\` (it is in the dev extra) or set VENV_PACK" >&2
  exit 2
fi

start=$SECONDS
mkdir -p "$(dirname "$OUT")"
work="$(mktemp -d "${TMPDIR:-/tmp}/txn-audit-executor-env.XXXXXX")"
partial="$OUT.partial-$$"
trap 'rm -rf "$work" "$partial"' EXIT
echo "building $OUT (a fresh environment from a wheel of this project: a few minutes)" >&2

# a clean copy of what the wheel is built from: no build/ or egg-info left over in the tree
mkdir "$work/src"
cp "$root/pyproject.toml" "$root/README.md" "$work/src/"
tar -C "$root" --exclude=__pycache__ -cf - txn_audit | tar -C "$work/src" -xf -

"$PYTHON" -m venv "$work/env"
"$work/env/bin/python" -m pip install --quiet --disable-pip-version-check "$work/src"
# what the executors import, in an isolated interpreter run from outside the source tree
(cd "$work" && env -i PATH=/usr/bin:/bin "$work/env/bin/python" -I -m txn_audit.executor_env >/dev/null) \
  || { echo "error: the environment built in $work/env does not import what executors need" >&2; exit 1; }

# pyspark's jars are Spark's JVM side, which executors take from the cluster's own Spark
"$VENV_PACK" --prefix "$work/env" --output "$partial" --format tar.gz --quiet \
  --exclude 'lib/python*/site-packages/pyspark/jars/*' ${PYTHON_PREFIX:+--python-prefix "$PYTHON_PREFIX"}
chmod 644 "$partial"
mv -f "$partial" "$OUT"
echo "$OUT built in $((SECONDS - start)) s ($(du -h "$OUT" | cut -f1))" >&2
