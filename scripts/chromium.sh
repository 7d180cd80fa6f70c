#!/usr/bin/env bash
# Installs Debian's chromium, which the console's browser tests drive headless, when it is missing.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "chromium is missing: run 'apt-get install -y chromium' as root" >&2
	exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
