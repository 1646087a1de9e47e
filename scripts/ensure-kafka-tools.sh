#!/usr/bin/env bash
# The real-broker harness (tools/realkafka) fetches Kafka releases with Maven and compiles its
# scenario client with javac. Install both when missing (needs root and a package mirror);
# otherwise say exactly what is missing.
set -euo pipefail
missing=()
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
[ ${#missing[@]} -eq 0 ] && exit 0
"$(dirname "$0")/apt-install.sh" \
  "the real-broker harness (Maven fetches Kafka from Maven Central, javac compiles its client) needs" "" \
  "${missing[@]}"
command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 \
  || { echo "error: ${missing[*]} installed but mvn or javac is not on PATH" >&2; exit 2; }
