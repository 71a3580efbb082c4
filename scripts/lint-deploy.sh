#!/usr/bin/env bash
# lint-deploy.sh - the offline checks of deploy/ (CI has no Docker engine):
#   1. every compose file parses and validates: docker-compose config -q,
#      with deploy/.env.example and with every profile on (the overlays in
#      deploy/scenario/ laid over docker-compose.yml);
#   2. every ${VARIABLE} a compose file reads is documented in .env.example;
#   3. every path the Dockerfile COPYs from the build context exists, and
#      with COPY . . no directory the CMake build adds is in .dockerignore;
#   4. every systemd unit has Restart=, KillSignal=SIGTERM, a stop timeout
#      longer than the relay's default --shutdown-grace, and the hardening
#      options NoNewPrivileges=yes and ProtectSystem=strict;
#   5. deploy/prometheus.yml passes `promtool check config` (when promtool
#      is at $OUTBOX_PROMTOOL; see scripts/get-promtool.sh).
# Prints one line per problem; exit 1 if any.
set -uo pipefail
cd "${OUTBOX_LINT_ROOT:-$(dirname "$0")/..}"  # OUTBOX_LINT_ROOT: another tree (the negative test)
RELAY_GRACE_DEFAULT_S=10 # relay --shutdown-grace default (relay/main.c)
fail=0
problem() { echo "lint-deploy: $*" >&2; fail=1; }

command -v docker-compose >/dev/null ||
	{ echo "lint-deploy: docker-compose is not installed (scripts/setup-deps.sh installs it)" >&2; exit 1; }

env_example=deploy/.env.example
[ -f "$env_example" ] || problem "$env_example is missing"
shopt -s nullglob
composes=(deploy/docker-compose*.yml deploy/compose*.yml)
[ ${#composes[@]} -gt 0 ] || problem "no compose file in deploy/"
for f in "${composes[@]}"; do
	profiles=$(grep -oE 'profiles: *\[[^]]*\]' "$f" | grep -oE '"[^"]+"' | tr -d '"' | sort -u)
	args=()
	for p in $profiles; do args+=(--profile "$p"); done
	out=$(docker-compose -f "$f" --env-file "$env_example" "${args[@]}" config -q 2>&1) ||
		problem "$f: docker-compose config failed: $out"
	[ -z "$out" ] || problem "$f: docker-compose config warned: $out"
	for v in $(grep -oE '\$\{[A-Za-z_][A-Za-z0-9_]*' "$f" | cut -c3- | sort -u); do
		grep -qE "^$v=" "$env_example" || problem "$f uses \${$v} but $env_example does not document it"
	done
done

# the scenario's overlays, each laid over the main compose file
for f in deploy/scenario/*.yml; do
	out=$(docker-compose -f deploy/docker-compose.yml -f "$f" --env-file "$env_example" config -q 2>&1) ||
		problem "$f over deploy/docker-compose.yml: docker-compose config failed: $out"
done

for df in deploy/Dockerfile deploy/*.Dockerfile; do
	[ -f "$df" ] || continue
	# COPY [--chown=..] SRC... DEST (not COPY --from=stage)
	while read -r line; do
		set -- $line
		shift # COPY
		srcs=()
		for a in "$@"; do
			case $a in --from=*) continue 2 ;; --*) ;; *) srcs+=("$a") ;; esac
		done
		unset 'srcs[${#srcs[@]}-1]' # the destination
		for s in "${srcs[@]}"; do
			case $s in
			*[*?[]*) compgen -G "$s" >/dev/null ;;
			*) [ -e "$s" ] ;;
			esac || problem "$df: COPY $s: no such path in the repository"
		done
	done < <(grep -E '^\s*(COPY|ADD)\s' "$df")
	grep -qE '^\s*USER\s+[^r0]' "$df" || problem "$df: no non-root USER"
	# COPY . . copies the tree: .dockerignore must not leave out a
	# directory the CMake build adds (the image build would stop there)
	if grep -qE '^\s*COPY\s+\.\s' "$df" && [ -f .dockerignore ]; then
		for d in $(sed -nE 's/^add_subdirectory\(([^) ]+)\).*/\1/p' CMakeLists.txt); do
			while read -r pat; do
				case $pat in '' | '#'* | '!'*) continue ;; esac
				pat=${pat%/}
				# shellcheck disable=SC2053
				[[ $d == $pat ]] && problem "$df: the build needs $d/ but .dockerignore leaves it out ('$pat')"
			done <.dockerignore
		done
	fi
	grep -qE '^\s*HEALTHCHECK\s' "$df" || problem "$df: no HEALTHCHECK"
done

units=(deploy/systemd/*.service)
[ ${#units[@]} -ge 3 ] || problem "want a systemd unit per program in deploy/systemd"
for u in "${units[@]}"; do
	for want in 'Restart=' 'KillSignal=SIGTERM' 'NoNewPrivileges=yes' 'ProtectSystem=strict'; do
		grep -q "^$want" "$u" || problem "$u: missing $want"
	done
	t=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s\?$/\1/p' "$u")
	if [ -z "$t" ]; then
		problem "$u: no TimeoutStopSec=<seconds>"
	elif [ "$t" -le "$RELAY_GRACE_DEFAULT_S" ]; then
		problem "$u: TimeoutStopSec=$t is not longer than the relay's shutdown grace ${RELAY_GRACE_DEFAULT_S}s"
	fi
done

if [ -n "${OUTBOX_PROMTOOL:-}" ] && [ -x "$OUTBOX_PROMTOOL" ]; then
	out=$("$OUTBOX_PROMTOOL" check config deploy/prometheus.yml 2>&1) ||
		problem "deploy/prometheus.yml: $out"
else
	echo "lint-deploy: promtool not found: deploy/prometheus.yml not checked (scripts/get-promtool.sh)"
fi

[ $fail = 0 ] && echo "lint-deploy: ok (${#composes[@]} compose file(s), Dockerfile, ${#units[@]} units)"
exit $fail
