#!/usr/bin/env bash
# get-promtool.sh - fetch promtool (only the binary, not the 330 MB install)
# from Debian's prometheus package into DIR (default build/tools), so the
# metrics tests can check the exposition format. Prints the path of the
# binary. Needs only apt-get (no root: `apt-get download` works as any user).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/tools}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -x "$dir/promtool" ]; then
	echo "$dir/promtool"
	exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get -q download prometheus >/dev/null 2>&1) || {
	# the package lists may be missing on a fresh machine
	SUDO=
	[ "$(id -u)" != 0 ] && SUDO=sudo
	$SUDO apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null
	(cd "$work" && apt-get -q download prometheus >/dev/null)
}
dpkg-deb -x "$work"/prometheus_*.deb "$work/x"
install -m 0755 "$work/x/usr/bin/promtool" "$dir/promtool"
echo "$dir/promtool"
