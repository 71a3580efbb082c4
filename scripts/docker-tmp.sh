#!/usr/bin/env bash
# docker-tmp.sh - a throwaway Docker engine for the tests, the way
# pg-tmp.sh is a throwaway PostgreSQL: its own data root, exec root, pid
# file and unix socket, never the engine a user already runs (nor its
# images, networks or bridge).
#
#   docker-tmp.sh start DIR   start dockerd with its state in DIR; write
#                             DIR/env (DOCKER_HOST=unix://...) and print it
#   docker-tmp.sh images DIR  make the images the compose stack needs
#                             offline (deploy/offline-images.sh) in it
#   docker-tmp.sh stop DIR    remove every container, network and volume,
#                             stop the engine, unmount, remove DIR
#   docker-tmp.sh status DIR  exit 0 if the engine in DIR answers
#
# The engine runs as root (dockerd needs it) with --bridge=none (it never
# touches docker0, which another engine may own), --iptables=false and
# --ip-masq=false (no NAT: containers reach nothing outside their
# networks), and networks from a free /20 of 198.19.0.0/16 only (part of
# 198.18.0.0/15, reserved for network tests; never 10/8, 172.16/12 or
# 192.168/16; OUTBOX_DOCKER_POOL overrides).
# It uses the dockerd already installed (docker.io or Docker's own
# packages); scripts/setup-deps.sh installs docker.io only when none is.
#
# When the engine cannot be had (not root, no dockerd), `start` writes the
# reason to DIR/skipped and exits 77 (ctest: Skipped) - unless OUTBOX_TEST_STRICT=1, when
# it exits 1: on a machine meant to run everything (.ci/run sets it) a compose run that cannot start is a failure.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DOCKER_POOL_SIZE=24 # each network compose makes is a /24 of the engine's pool
START_DEADLINE_S=60 # dockerd answering on its socket
STOP_DEADLINE_S=30  # dockerd gone after SIGTERM, before SIGKILL

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|images|stop|status DIR" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

say() { echo "docker-tmp: $*" >&2; }

# cannot REASON: skip (77) without OUTBOX_TEST_STRICT=1, fail (1) with it.
cannot() {
	if [ "${OUTBOX_TEST_STRICT:-}" = 1 ]; then
		say "CANNOT start a Docker engine: $1 (OUTBOX_TEST_STRICT=1: this is a failure, not a skip)"
		exit 1
	fi
	echo "$1" >"$dir/skipped"
	say "SKIPPED: $1"
	exit 77
}

# The env file of a running engine: DOCKER_HOST, the pid and the short
# run directory (exec root + socket: unix socket paths are limited to 108
# bytes, so they live under /tmp whatever DIR is).
load_env() {
	[ -f "$dir/env" ] || return 1
	# shellcheck disable=SC1091
	. "$dir/env"
	export DOCKER_HOST
}

engine_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

start() {
	[ -f "$dir/env" ] && stop_engine
	rm -f "$dir/skipped"
	[ "$(id -u)" = 0 ] || cannot "not root (a throwaway dockerd must run as root; run the suite as root or with sudo)"
	command -v dockerd >/dev/null || cannot "no dockerd on this machine (scripts/setup-deps.sh --tests installs docker.io, as root)"
	command -v docker >/dev/null || cannot "no docker client on this machine"
	command -v docker-compose >/dev/null || cannot "no docker-compose on this machine (scripts/setup-deps.sh --tests installs it)"
	# The pool: a /20 of 198.19.0.0/16 that no interface here uses yet (so
	# that two suites, or another engine, never hand out the same subnet)
	local k pool=${OUTBOX_DOCKER_POOL:-}
	if [ -z "$pool" ]; then
		for k in $(seq 0 15); do
			ip -4 -o addr show | grep -qE "inet 198\.19\.($(seq -s '|' $((k * 16)) $((k * 16 + 15))))\." && continue
			pool=198.19.$((k * 16)).0/20
			break
		done
		[ -n "$pool" ] || { say "every /20 of 198.19.0.0/16 is in use on this machine"; exit 1; }
	fi
	local run
	run=$(mktemp -d /tmp/obdk.XXXXXX)
	mkdir -p "$dir/data"
	DOCKER_HOST=unix://$run/docker.sock
	export DOCKER_HOST
	dockerd --data-root "$dir/data" --exec-root "$run/exec" --pidfile "$run/dockerd.pid" \
		-H "$DOCKER_HOST" --bridge=none --iptables=false --ip-masq=false \
		--default-address-pool "base=$pool,size=$DOCKER_POOL_SIZE" \
		--log-level warn >"$dir/dockerd.log" 2>&1 &
	local pid=$!
	cat >"$dir/env" <<EOF
DOCKER_HOST=$DOCKER_HOST
OUTBOX_DOCKER_PID=$pid
OUTBOX_DOCKER_RUN=$run
EOF
	local deadline=$(($(date +%s) + START_DEADLINE_S))
	until engine_answers; do
		if ! kill -0 "$pid" 2>/dev/null; then
			say "dockerd exited at start; its log follows"
			tail -20 "$dir/dockerd.log" >&2
			rm -f "$dir/env"
			rm -rf "$run"
			exit 1
		fi
		[ "$(date +%s)" -lt "$deadline" ] || { say "dockerd did not answer within ${START_DEADLINE_S}s"; stop_engine; exit 1; }
		sleep 0.2
	done
	say "engine $(docker version --format '{{.Server.Version}}') up (pid $pid, storage $(docker info --format '{{.Driver}}'), networks from $pool)"
	echo "DOCKER_HOST=$DOCKER_HOST"
}

# Everything the engine holds, then the engine, its mounts and its files.
stop_engine() {
	load_env || { rm -rf "$dir"; return 0; }
	local bridges=()
	if engine_answers; then
		local ids
		ids=$(docker ps -aq)
		[ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1 || true
		local n
		for n in $(docker network ls -q --filter type=custom); do
			bridges+=("br-$n")
			docker network rm "$n" >/dev/null 2>&1 || true
		done
		docker volume prune -f >/dev/null 2>&1 || true
	fi
	if kill -0 "$OUTBOX_DOCKER_PID" 2>/dev/null; then
		kill -TERM "$OUTBOX_DOCKER_PID"
		local deadline=$(($(date +%s) + STOP_DEADLINE_S))
		while kill -0 "$OUTBOX_DOCKER_PID" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
		kill -KILL "$OUTBOX_DOCKER_PID" 2>/dev/null || true
	fi
	# a SIGKILLed engine leaves its containerd and shims: they name the run dir
	pkill -KILL -f -- "$OUTBOX_DOCKER_RUN" 2>/dev/null || true
	local m
	for m in $(findmnt -rn -o TARGET | grep -E "^($dir|$OUTBOX_DOCKER_RUN)/" | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	local b
	for b in "${bridges[@]}"; do ip link del "$b" 2>/dev/null || true; done
	rm -rf "$OUTBOX_DOCKER_RUN" "$dir"
}

case $cmd in
start) start ;;
images)
	load_env || { [ -f "$dir/skipped" ] && { say "SKIPPED: $(cat "$dir/skipped")"; exit 77; }; say "no engine in $dir"; exit 1; }
	exec "$ROOT/deploy/offline-images.sh"
	;;
stop) stop_engine ;;
status) load_env && engine_answers ;;
*) echo "usage: $0 start|images|stop|status DIR" >&2; exit 2 ;;
esac
