#!/usr/bin/env bash
# Create or refresh the project's virtual environment: missing, broken (its interpreter or
# packages no longer import) or older than pyproject.toml all mean "build it again".
set -euo pipefail
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
STAMP="$VENV/.txn-audit-installed"
HERE="$(cd "$(dirname "$0")" && pwd)"

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "error: $PYTHON not found; Python 3.11 or newer is required" >&2; exit 2
fi
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "error: Python 3.11 or newer is required, $PYTHON is $("$PYTHON" --version 2>&1)" >&2; exit 2
fi

healthy() {
  [ -f "$STAMP" ] && [ "$STAMP" -nt pyproject.toml ] \
    && "$VENV/bin/python" -c 'import txn_audit, pyspark, pyarrow, great_expectations, typer, plotly, crc32c, cramjam, pytest, hypothesis, playwright, PIL, papermill, ipykernel, fsspec, requests, venv_pack' >/dev/null 2>&1 \
    && [ -x "$VENV/bin/txn-audit" ] && [ -x "$VENV/bin/spark-submit" ]
}

# pyspark's .venv/bin/spark-submit only works in an activated environment: ours works without
spark_submit() {
  cmp -s "$HERE/spark-submit" "$VENV/bin/spark-submit" || install -m 755 "$HERE/spark-submit" "$VENV/bin/spark-submit"
}

if healthy; then spark_submit; VENV="$VENV" "$HERE/ensure-docs-assets.sh"; exit 0; fi
echo "setting up $VENV (first run downloads and builds pyspark: a few minutes)" >&2
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev]'
touch "$STAMP"
spark_submit
healthy || { echo "error: $VENV was built but does not import the project's packages" >&2; exit 1; }
VENV="$VENV" "$HERE/ensure-docs-assets.sh"
echo "$VENV ready" >&2
