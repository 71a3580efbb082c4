#!/usr/bin/env bash
# expect_chain_broken.sh - the negative control of deploy/chain.sh: with a
# downstream that ignores the Idempotency-Key (outbox-notify-sink
# --ignore-key), the chain's effect check MUST fail with effects counted
# over the calls. Passes only when the chain exits 1 (a check failed: not
# 3, could not run) for exactly that reason.
set -uo pipefail
script=${1:?usage: expect_chain_broken.sh path/to/chain.sh}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$script" --broken >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" != 1 ]; then
	echo "expect_chain_broken: the broken chain exited $rc, expected 1 (a check failed)" >&2
	exit 1
fi
grep -q '^FAILED: the downstream acted once per call' "$out" ||
	{ echo "expect_chain_broken: the duplicate effects were not the failure" >&2; exit 1; }
if grep -E '^FAILED: ' "$out" | grep -vq 'the downstream acted once per call'; then
	echo "expect_chain_broken: another check failed too: the chain itself is broken" >&2
	exit 1
fi
echo "expect_chain_broken: ok: the key-ignoring downstream's duplicate effects were caught"
