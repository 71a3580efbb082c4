#!/usr/bin/env bash
# offline-images.sh - the images the compose stack needs, made on a machine
# that reaches Debian's package mirror but no image registry:
#   1. debian:bookworm-slim (the FROM of deploy/Dockerfile and
#      deploy/postgres/Dockerfile): debootstrap --variant=minbase bookworm
#      from the mirror apt already uses, imported with `docker import`; only
#      when the engine has no image of that name (an official one is kept);
#   2. outbox-postgres:15 (deploy/postgres/Dockerfile): PostgreSQL 15 from
#      Debian's packages, a stand-in for the official postgres image.
# Then run the stack with it (builds reach the mirror through the host's
# network):
#   cd deploy && POSTGRES_IMAGE=outbox-postgres:15 OUTBOX_BUILD_NETWORK=host \
#       docker-compose up -d --build
# Needs root (debootstrap) and a Docker engine (DOCKER_HOST is honoured).
# OUTBOX_DEBIAN_MIRROR overrides the mirror.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE_IMAGE=debian:bookworm-slim
PG_IMAGE=${OUTBOX_POSTGRES_OFFLINE_IMAGE:-outbox-postgres:15}

say() { echo "offline-images: $*" >&2; }

# The Debian mirror apt uses for bookworm itself (not -security).
mirror() {
	[ -n "${OUTBOX_DEBIAN_MIRROR:-}" ] && { echo "$OUTBOX_DEBIAN_MIRROR"; return; }
	local m
	m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
		grep -oE '(URIs:[[:space:]]*|^deb[[:space:]]+)https?://[^[:space:]]+' | grep -oE 'https?://[^[:space:]]+' |
		grep -v security | grep -i debian | head -1 || true)
	echo "${m:-http://deb.debian.org/debian}"
}

docker version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
	{ say "no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-unset})"; exit 1; }

if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
	say "$BASE_IMAGE is there already: kept"
else
	[ "$(id -u)" = 0 ] || { say "debootstrap needs root"; exit 1; }
	command -v debootstrap >/dev/null || { say "debootstrap is not installed (apt-get install debootstrap)"; exit 1; }
	rootfs=$(mktemp -d /tmp/outbox-rootfs.XXXXXX)
	trap 'rm -rf "$rootfs"' EXIT
	m=$(mirror)
	say "debootstrap --variant=minbase bookworm from $m (about a minute)"
	debootstrap --variant=minbase bookworm "$rootfs" "$m" >"$rootfs.log" 2>&1 ||
		{ tail -20 "$rootfs.log" >&2; rm -f "$rootfs.log"; say "debootstrap failed"; exit 1; }
	rm -f "$rootfs.log"
	# what the slim image leaves out too: downloaded packages and lists
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
	tar -C "$rootfs" -c . | docker import - "$BASE_IMAGE" >/dev/null
	say "$BASE_IMAGE imported"
fi

say "building $PG_IMAGE from deploy/postgres/Dockerfile"
docker build -q --network host -t "$PG_IMAGE" "$ROOT/deploy/postgres" >/dev/null
say "done: POSTGRES_IMAGE=$PG_IMAGE OUTBOX_BUILD_NETWORK=host docker-compose up -d --build"
