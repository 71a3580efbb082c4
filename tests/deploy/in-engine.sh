#!/usr/bin/env bash
# in-engine.sh DIR CMD... - run CMD against the suite's throwaway Docker
# engine in DIR (scripts/docker-tmp.sh start DIR made it): DOCKER_HOST
# points at it, and the compose stack uses the images made offline
# (POSTGRES_IMAGE=outbox-postgres:15, builds on the host's network).
# When the engine could not be had, exit 77 (ctest: Skipped) with the
# reason - a failure instead under OUTBOX_TEST_STRICT=1.
set -uo pipefail
dir=${1:?usage: in-engine.sh DIR CMD...}
shift
if [ -f "$dir/skipped" ]; then
	why=$(cat "$dir/skipped")
	if [ "${OUTBOX_TEST_STRICT:-}" = 1 ]; then
		echo "in-engine: no Docker engine ($why); OUTBOX_TEST_STRICT=1: a compose run that cannot start is a FAILURE" >&2
		exit 1
	fi
	echo "in-engine: SKIPPED: no Docker engine: $why" >&2
	exit 77
fi
[ -f "$dir/env" ] || { echo "in-engine: no engine in $dir (did docker_start fail?)" >&2; exit 1; }
# shellcheck disable=SC1091
. "$dir/env"
export DOCKER_HOST
export POSTGRES_IMAGE=${OUTBOX_TEST_POSTGRES_IMAGE:-outbox-postgres:15}
export OUTBOX_BUILD_NETWORK=host
exec "$@"
