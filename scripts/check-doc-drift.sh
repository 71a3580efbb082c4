#!/usr/bin/env bash
# check-doc-drift.sh - what the docs quote that can be checked by machine
# exists in the code: so the next rename that forgets a doc fails a test.
#
#   scripts/check-doc-drift.sh BIN_DIR      (or OUTBOX_BIN_DIR=BIN_DIR)
#
# Read: README.md, docs/*.md, sql/README.md, bench/*/README.md,
# examples/README.md. Checked:
#   - SQL objects: every `outbox.NAME` / `inbox.NAME` in backticks is a
#     table, view, sequence, function or procedure that sql/ creates (or a
#     column of the generated per-slot tables, outbox.events_N);
#   - flags: in a code span that starts with one of our programs
#     (`outbox-relay ...`, `outboxctl dead requeue ...`), every --flag is
#     one that program's command takes (its --help-markdown table);
#   - metrics: every outbox_* name in backticks that ends like a series
#     (_total, _seconds, _bytes, _info, ...) is a string in the C sources.
# Defaults quoted in prose are not checked (docs/configuration.md, made
# from the tables by scripts/gen-config-doc.sh, is the reference).
#
# Exit 0 when everything quoted exists; 1 with one line per stale quote
# (FILE: what, why). tests/ops/doc_drift_negative.sh shows it failing.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
bin=$(cd "${1:-${OUTBOX_BIN_DIR:?check-doc-drift: give BIN_DIR (see --help)}}" && pwd)
# the tree to read: this checkout, or OUTBOX_LINT_ROOT (the negative test's copies)
cd "${OUTBOX_LINT_ROOT:-$(dirname "$0")/..}"
docs=(README.md docs/*.md sql/README.md bench/*/README.md examples/README.md)
fail=0
bad() { echo "check-doc-drift: $1"; fail=1; }

# ---- SQL objects ---------------------------------------------------------
sqlnames=$(grep -hoiE 'CREATE +(OR REPLACE +)?(UNLOGGED +)?(FUNCTION|VIEW|TABLE|SEQUENCE|PROCEDURE|TYPE) +(IF NOT EXISTS +)?(outbox|inbox|app)\.[a-z_0-9]+' \
	sql/*/*.sql sql/*/functions/*.sql | sed -E 's/.* ((outbox|inbox|app)\.[a-z_0-9]+)$/\1/I' | sort -u)
# made another way: by a migration's DO block, and migrate's bookkeeping
# (common/migrate.c)
sqlnames+=$'\n'"outbox.message_keys"$'\n'"outbox.schema_migrations"$'\n'"outbox.schema_files"
sqlnames+=$'\n'"inbox.schema_migrations"$'\n'"inbox.schema_files"
nsql=0 nflags=0 nmetrics=0
while IFS=: read -r file name; do
	case $name in outbox.events_*) continue ;; esac # the slots' tables, made in a loop
	nsql=$((nsql + 1))
	grep -qxF "$name" <<<"$sqlnames" || bad "$file: \`$name\` is not a table, view, sequence or function in sql/"
done < <(grep -oE '`(outbox|inbox)\.[a-z_0-9]+' "${docs[@]}" | sed 's/`//' | sort -u |
	grep -vE ':(outbox|inbox)\.(c|h|sql|md)$')

# ---- flags ---------------------------------------------------------------
tables=$(mktemp)
trap 'rm -f "$tables"' EXIT
for p in outbox-relay outbox-consumer outbox-producer outboxctl outbox-notify-sink outbox-herd; do
	"$bin/$p" --help-markdown >>"$tables" 2>/dev/null || { bad "$bin/$p --help-markdown failed"; }
done
# "### outboxctl dead" headings, then "| `--flag` |" rows: "PROGRAM COMMAND --flag" lines
known=$(awk '/^#+ /{sub(/^#+ /,""); prog=$0; next} /^\| `--/{f=$2; gsub(/`/,"",f); print prog " " f}' "$tables")
commands=$(awk '/^#+ /{sub(/^#+ /,""); print}' "$tables" | sort -u)
while IFS=: read -r file span; do
	span=${span#\`}
	span=${span%\`}
	# the longest program/command heading the span starts with
	prog=""
	while read -r c; do
		case "$span " in "$c "*) [ ${#c} -gt ${#prog} ] && prog=$c ;; esac
	done <<<"$commands"
	[ -n "$prog" ] || continue
	for f in $(grep -oE '(^| )--[a-z][a-z0-9-]*' <<<"$span" | tr -d ' '); do
		case $f in --help | --version | --help-markdown) continue ;; esac
		nflags=$((nflags + 1))
		grep -qxF "$prog $f" <<<"$known" || bad "$file: \`$span\`: $prog has no $f"
	done
done < <(grep -oE '`(outbox-relay|outbox-consumer|outbox-producer|outboxctl|outbox-notify-sink|outbox-herd)( [^`]*)?`' "${docs[@]}" | sort -u)

# ---- metrics -------------------------------------------------------------
csrc=$(cat common/*.c relay/*.c consumer/*.c producer/*.c ctl/*.c tools/*/*.c)
while IFS=: read -r file name; do
	base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$name")
	nmetrics=$((nmetrics + 1))
	grep -qF "\"$base\"" <<<"$csrc" || grep -qF "$base " <<<"$csrc" || grep -qF "$base{" <<<"$csrc" ||
		bad "$file: metric \`$name\` is not in the C sources"
done < <(grep -oE '`outbox_[a-z_]+(_total|_seconds|_bytes|_info|_inflight|_in_flight|_bucket|_sum|_count)`' "${docs[@]}" |
	sed 's/`//g' | sort -u)

[ $fail = 0 ] && echo "check-doc-drift: every SQL object ($nsql), flag ($nflags) and metric ($nmetrics)" \
	"quoted in the docs exists"
exit $fail
