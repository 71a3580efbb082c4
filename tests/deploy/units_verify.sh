#!/usr/bin/env bash
# units_verify.sh BUILD_DIR - install the build into a temp prefix
# (cmake --install) and check the systemd units there as systemd would:
# every unit of deploy/systemd is installed, its ExecStart= is the installed
# program, its Documentation= file exists, and `systemd-analyze verify`
# passes with nothing to say (it exits 0 even on an unknown key or a bad
# value, so any output is a failure). A unit with a typo must fail the same
# check: the negative control. No systemd needs to run as PID 1.
set -uo pipefail
build=${1:?usage: units_verify.sh BUILD_DIR}
src=$(cd "$(dirname "$0")/../.." && pwd)
command -v systemd-analyze >/dev/null || {
	[ "${OUTBOX_TEST_STRICT:-}" = 1 ] && { echo "units_verify: systemd-analyze is missing (OUTBOX_TEST_STRICT=1: a failure)" >&2; exit 1; }
	echo "units_verify: SKIPPED: systemd-analyze is not installed" >&2; exit 77
}
prefix=$(mktemp -d /tmp/outbox-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
fail=0
problem() { echo "units_verify: $*" >&2; fail=1; }
cmake --install "$build" --prefix "$prefix" >"$prefix.log" 2>&1 ||
	{ cat "$prefix.log" >&2; rm -f "$prefix.log"; echo "units_verify: cmake --install failed" >&2; exit 1; }
rm -f "$prefix.log"
unitdir=$prefix/lib/systemd/system

# verify UNIT: systemd-analyze verify with no output
verify() {
	local out
	out=$(systemd-analyze verify "$1" 2>&1) || { echo "$out"; return 1; }
	[ -z "$out" ] || { echo "$out"; return 1; }
}

n=0
for u in "$src"/deploy/systemd/*.service; do
	name=$(basename "$u")
	inst=$unitdir/$name
	[ -f "$inst" ] || { problem "$name is not installed in $unitdir"; continue; }
	n=$((n + 1))
	exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$inst")
	case $exe in "$prefix"/bin/*) ;; *) problem "$name: ExecStart=$exe is not the installed program under $prefix/bin" ;; esac
	[ -x "$exe" ] || problem "$name: ExecStart=$exe is not executable"
	doc=$(sed -n 's|^Documentation=file://||p' "$inst")
	[ -z "$doc" ] || [ -f "$doc" ] || problem "$name: Documentation= file $doc was not installed"
	out=$(verify "$inst") || problem "$name: systemd-analyze verify: $out"
done
[ "$n" -ge 3 ] || problem "want the three units installed, found $n"

# the negative control: the same check must catch a typo
bad=$unitdir/outbox-typo.service
sed 's/^Restart=on-failure/Restart=sometimes/' "$unitdir/outbox-relay.service" >"$bad"
if verify "$bad" >/dev/null; then
	problem "a unit with Restart=sometimes passed verify: this check cannot fail"
fi
[ $fail = 0 ] && echo "units_verify: ok ($n units installed under $prefix and verified)"
exit $fail
