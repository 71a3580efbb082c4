#!/usr/bin/env bash
# demo_web_check.sh - `bash scripts/demo.sh --web` itself, clicked through in
# Debian's chromium: starts the script as a user would (it installs what is
# missing and builds), reads the URL and the token it prints, runs
# tests/browser/web_demo.mjs on steps 1-5 (the facts shown checked against
# psql on the demo's own databases) and tests/browser/demo_page.mjs (the
# demonstration leads the page; the herd simulator, the stepper, the 25
# combinations and the exercises against the programs and psql), then
# stops the demo with SIGTERM (its
# trap for Ctrl-C; a background job's SIGINT is ignored by bash) and checks
# that it cleaned up. Not in ctest (it builds, as the demo does):
# run it by hand from a clone, after scripts/setup-deps.sh --tests.
#
#   tests/browser/demo_web_check.sh [ARTIFACT_DIR]   (default build/tests/artifacts)
set -euo pipefail
cd "$(dirname "$0")/../.."
artifacts=$(mkdir -p "${1:-build/tests/artifacts}" && cd "${1:-build/tests/artifacts}" && pwd)
out=$(mktemp /tmp/demo-web-check.XXXXXX)
bash scripts/demo.sh --web 0 >"$out" 2>&1 &
demo=$!
stop() { kill -TERM "$demo" 2>/dev/null || true; wait "$demo" 2>/dev/null || true; }
trap 'stop; rm -f "$out"' EXIT

end=$(( $(date +%s) + 900 )) # a first run installs and builds
until grep -q "^demo: open " "$out"; do
	if ! kill -0 "$demo" 2>/dev/null || [ "$(date +%s)" -ge "$end" ]; then
		echo "demo_web_check: demo.sh --web never served:" >&2; tail -n 30 "$out" >&2; exit 1
	fi
	sleep 0.5
done
# "demo: open http://127.0.0.1:PORT/#token=TOKEN"
url=$(sed -n 's|^demo: open \(.*\)/#token=.*$|\1|p' "$out")
token=$(sed -n 's|^demo: open .*/#token=\(.*\)$|\1|p' "$out")
work=$(sed -n 's|^demo: starting a throwaway PostgreSQL in \(.*\)/pg$|\1|p' "$out")
if [ -z "$url" ] || [ -z "$token" ] || [ ! -d "$work/pg" ]; then
	echo "demo_web_check: cannot read the URL, token or work dir from:" >&2; cat "$out" >&2; exit 1
fi
# shellcheck disable=SC1091
. "$work/pg/env"
server="host=$PGHOST port=$PGPORT user=$PGUSER"
P="$server dbname=producer" I="$server dbname=consumer"

# shellcheck disable=SC2016 # the JavaScript's $KEY and $$ quotes are its own
arg=$(URL="$url" TOKEN="$token" ART="$artifacts" P="$P" I="$I" node -e '
const e = process.env, P = e.P, I = e.I;
const q = (db, sql, want) => want === undefined ? { db, sql } : { db, sql, want };
const eff = n => q(I, "SELECT count(*) FROM inbox.notifications WHERE idempotency_key = $KEY", n);
console.log(JSON.stringify({ url: e.URL, token: e.TOKEN, artifacts: e.ART, steps: [
  { n: 1, facts: { replayed: "true", reports: "1" }, highlighted: true,
    facts_from_psql: { reports: q(P, "SELECT count(*) FROM app.bug_reports WHERE title LIKE $$Lost response, step 1 %$$") } },
  { n: 2, facts: { replayed: "false", reports: "2" }, highlighted: true,
    facts_from_psql: { reports: q(P, "SELECT count(*) FROM app.bug_reports WHERE title LIKE $$Lost response, step 2 %$$") } },
  { n: 3, facts: { duplicates: "1", effects: "1" }, psql: [eff("1")], highlighted: true, highlight_key: true },
  { n: 4, facts: { fenced_out: "true", effects: "1" }, greater: [["fence_after", "fence_before"]],
    facts_from_psql: { fence_after: q(P, "SELECT max(fence) FROM outbox.messages WHERE idempotency_key = $KEY") },
    psql: [eff("1")], highlighted: true, highlight_key: true },
  { n: 5, facts: { effects: "2" }, psql: [eff("2")], highlighted: true, highlight_key: true },
]}));')
node tests/browser/web_demo.mjs "$arg"
# the whole demonstration's page, as test_demo_page_browser checks it
bindir=$(cd "${OUTBOX_BUILD_DIR:-build}/bin" && pwd)
page=$(URL="$url" TOKEN="$token" ART="$artifacts" BIN="$bindir" P="$P" I="$I" node -e '
const e = process.env;
console.log(JSON.stringify({ url: e.URL, token: e.TOKEN, artifacts: e.ART, bin_dir: e.BIN, db: e.P, inbox_db: e.I }));')
node tests/browser/demo_page.mjs "$page"

stop
trap 'rm -f "$out"' EXIT
grep -q "demo: stopping" "$out" || { echo "demo_web_check: no 'demo: stopping' after SIGTERM" >&2; exit 1; }
[ ! -e "$work" ] || { echo "demo_web_check: $work left behind" >&2; exit 1; }
echo "demo_web_check: OK: steps 1-5 and the demonstration's page of scripts/demo.sh --web as shown equal psql and the programs; screenshots in $artifacts"
