#!/usr/bin/env bash
# Spark needs Java 17 or newer. Say so plainly when it is missing or too old.
set -uo pipefail
if [ -n "${JAVA_HOME:-}" ]; then JAVA="$JAVA_HOME/bin/java"; else JAVA="$(command -v java || true)"; fi
if [ -z "$JAVA" ] || [ ! -x "$JAVA" ]; then
  echo "error: Java 17 or newer is required (Spark runs on the JVM) and none was found." >&2
  echo "       Install it, e.g.: sudo apt-get install -y openjdk-17-jre-headless (or set JAVA_HOME)" >&2
  exit 2
fi
version=$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([0-9][0-9.]*\).*/\1/p' | head -n1)
major=${version%%.*}
[ "$major" = "1" ] && major=$(echo "$version" | cut -d. -f2)
if [ -z "$major" ] || [ "$major" -lt 17 ]; then
  echo "error: Java 17 or newer is required, found '${version:-unknown}' at $JAVA." >&2
  echo "       Install openjdk-17-jre-headless (or newer) and put it first on PATH or in JAVA_HOME." >&2
  exit 2
fi
