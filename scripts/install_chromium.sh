#!/usr/bin/env bash
# Installs Debian's Chromium for the report's browser test (tests/browser), if missing.
# Idempotent; CI calls it from .ci/run. Without Chromium the browser tests skip with a
# reason, so a machine without apt-get still runs the rest of the suite.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null | tail -n 1)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "apt-get not found: install Chromium yourself and set HANGDOC_CHROMIUM to its path" >&2
    exit 1
fi
SUDO=()
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo -n)
    else
        echo "installing Chromium needs root (or sudo)" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
# fonts-dejavu-core: the page uses system fonts only; give the screenshots real glyphs.
"${SUDO[@]}" apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
echo "installed: $(/usr/bin/chromium --version 2>/dev/null | tail -n 1)"
