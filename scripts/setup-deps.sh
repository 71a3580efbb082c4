#!/usr/bin/env bash
# setup-deps.sh - install the Debian 12 packages the build and the demo
# need, only when something is missing; with --tests also what only the
# test suite needs (a Docker engine, debootstrap, systemd-analyze, clang
# with libFuzzer, tinyproxy). Uses sudo when not root.
set -euo pipefail

packages=(build-essential cmake pkg-config libpq-dev uuid-dev libnng-dev nng-utils
	check postgresql-15 postgresql-client-15 libjansson-dev libhttp-parser-dev libssl-dev openssl
	libmbedtls-dev libcurl4-openssl-dev ca-certificates
	docker-compose nftables curl jq)
if [ "${1:-}" = --tests ]; then
	# clang + its fuzzer/sanitizer runtime: the libFuzzer tests (tests/fuzz.cmake)
	packages+=(debootstrap systemd clang-14 libclang-rt-14-dev)
	# plpgsql_check's profiler: the protocol checker's coverage (tests/check/)
	packages+=(postgresql-15-plpgsql-check)
	# The webhook's forward proxy (test_consumer_webhook_proxy): tinyproxy's
	# program alone, no service (Debian 12: tinyproxy-bin 1.11.1-2.1+deb12u1)
	packages+=(tinyproxy-bin)
	# The compose tests run a throwaway Docker engine (scripts/docker-tmp.sh)
	# on the dockerd already installed (docker.io or Docker's own packages);
	# Debian's docker.io only when there is none (it conflicts with Docker's).
	command -v dockerd >/dev/null || packages+=(docker.io)
	# The MCP test drives the server with the official SDK client (Node >= 18)
	command -v node >/dev/null || packages+=(nodejs)
	command -v npm >/dev/null || packages+=(npm)
	# The browser tests drive Debian's chromium with playwright-core (tests/browser)
	packages+=(chromium)
	# examples/python (test_examples): psycopg 3, for Debian's /usr/bin/python3
	packages+=(python3-psycopg)
	# examples/go (test_examples): Go and pgx v4's sources (with pgconn,
	# pgproto3, pgtype, x/crypto, x/text... by its Depends), built offline
	# in GOPATH mode against /usr/share/gocode: no Go module is downloaded
	packages+=(golang-go golang-github-jackc-pgx-v4-dev)
	# PgBouncer in front of the fixture's server (test_pgbouncer,
	# scripts/pgbouncer-tmp.sh)
	packages+=(pgbouncer)
fi

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
install_missing() {
	[ ${#missing[@]} -eq 0 ] && return 0

	SUDO=
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null || { echo "setup-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
		SUDO=sudo
	fi
	echo "setup-deps: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q \
		--no-install-recommends "${missing[@]}" >/dev/null
}
install_missing

# The MCP SDK client of tests/mcp and playwright-core of tests/browser
# (each pinned by its package-lock.json), from the npm registry, once.
if [ "${1:-}" = --tests ]; then
	mcp="$(cd "$(dirname "$0")/.." && pwd)/tests/mcp"
	if [ ! -d "$mcp/node_modules/@modelcontextprotocol/sdk" ]; then
		echo "setup-deps: npm ci in $mcp" >&2
		npm ci --prefix "$mcp" --no-audit --no-fund --loglevel=error >/dev/null
	fi
	# playwright-core of tests/browser (pinned the same way; it downloads no
	# browser: the tests give it Debian's chromium by its path)
	browser="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
	if [ ! -d "$browser/node_modules/playwright-core" ]; then
		echo "setup-deps: npm ci in $browser" >&2
		npm ci --prefix "$browser" --no-audit --no-fund --loglevel=error >/dev/null
	fi
	# node-postgres of examples/node (pinned the same way; test_examples)
	examples="$(cd "$(dirname "$0")/.." && pwd)/examples/node"
	if [ ! -d "$examples/node_modules/pg" ]; then
		echo "setup-deps: npm ci in $examples" >&2
		npm ci --prefix "$examples" --no-audit --no-fund --loglevel=error >/dev/null
	fi
fi
