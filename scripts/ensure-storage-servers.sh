#!/usr/bin/env bash
# The storage tests run real servers on 127.0.0.1: S3Proxy and an HDFS NameNode + DataNode
# (Hadoop's minicluster), fetched from Maven Central into ~/.cache/txn-audit/stores
# (TXN_AUDIT_STORES_CACHE moves it; tools/stores). Needs Maven and javac, as the real-broker
# harness does: install them when missing, then fetch (nothing to do when already cached).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VENV="${VENV:-.venv}"
"$HERE/ensure-kafka-tools.sh"
"$VENV/bin/python" -m tools.stores
