#!/usr/bin/env bash
# apt-install.sh "WHAT NEEDS THEM" "HOW ELSE" PACKAGE...
# Install Debian packages the project needs when this is root on a Debian/Ubuntu machine (the
# package lists are refreshed only when the first try fails); otherwise say what to install and
# exit 2. Used by the ensure-* scripts.
set -euo pipefail
needs="$1"; otherwise="$2"; shift 2
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "error: $needs $*; install them (Debian/Ubuntu: apt-get install $*)${otherwise:+ $otherwise}" >&2
  exit 2
fi
echo "installing $* ($needs them)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
fi
