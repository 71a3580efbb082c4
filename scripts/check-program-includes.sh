#!/usr/bin/env bash
# check-program-includes.sh - no program includes another program's
# headers: every #include "X" in a program's sources (relay/, consumer/,
# producer/, ctl/, each tools/NAME/) must name a header of that program or
# of a library (common/include/outbox/X, common/X for common's own files,
# or client/X, the agent-side client), and no program's CMakeLists.txt adds
# another program's folder to its include path. What several programs
# need lives in a library. One line per problem; exit 1 if any.
set -uo pipefail
cd "${OUTBOX_LINT_ROOT:-$(dirname "$0")/..}" # OUTBOX_LINT_ROOT: another tree (the negative test)

programs="relay consumer producer ctl $(ls -d tools/*/ 2>/dev/null | sed 's#/$##')"
problems=0
say() { echo "check-program-includes: $*"; problems=$((problems + 1)); }

for p in $programs; do
	for f in $(find "$p" -name '*.[ch]' -not -path '*/node_modules/*' | sort); do
		dir=$(dirname "$f")
		while read -r h; do
			[ -n "$h" ] || continue
			# the program's own header, or a library's
			[ -f "$dir/$h" ] || [ -f "$p/$h" ] || [ -f "common/include/$h" ] && continue
			[ -f "common/include/outbox/$h" ] || [ -f "client/$h" ] && continue
			other=$(find relay consumer producer ctl tools -name "$(basename "$h")" \
				-not -path "$p/*" 2>/dev/null | head -1)
			[ -n "$other" ] || continue # generated or third-party: not another program's
			say "$f includes \"$h\", a header of another program ($other): move what both need to a library (common/, client/)"
		done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
	done
	if [ -f "$p/CMakeLists.txt" ]; then
		for q in relay consumer producer ctl tools; do
			[ "$q" = "$p" ] || [ "${p#"$q"/}" != "$p" ] && continue
			if grep -E 'include_directories' -A3 "$p/CMakeLists.txt" |
				grep -qE "CMAKE_SOURCE_DIR\}/$q\b"; then
				say "$p/CMakeLists.txt adds $q/ to its include path"
			fi
		done
	fi
done
[ "$problems" = 0 ] || exit 1
echo "check-program-includes: no program includes another's headers"
