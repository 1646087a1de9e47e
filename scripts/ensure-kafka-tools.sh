#!/usr/bin/env bash
# The real-broker harness (tools/realkafka) fetches Kafka releases with Maven and compiles its
# scenario client with javac. Install both when missing (needs root and a package mirror);
# otherwise say exactly what is missing.
set -euo pipefail
missing=()
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "error: the real-broker harness needs ${missing[*]} (Maven fetches Kafka from Maven Central," \
       "javac compiles its client); install them (Debian/Ubuntu: apt-get install ${missing[*]})" >&2
  exit 2
fi
echo "installing ${missing[*]} (the real-broker harness needs them)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 \
  || { echo "error: ${missing[*]} installed but mvn or javac is not on PATH" >&2; exit 2; }
