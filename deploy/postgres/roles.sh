#!/bin/sh
# roles.sh - first start of the compose stack's PostgreSQL: one login role
# per program, each a member of its group role (docs/security.md, "Database
# roles"), so that no program but migrate (the database owner) runs as the
# superuser: producer_1 in outbox_producer, relay_1 in outbox_relay (both
# relay replicas), consumer_1 in outbox_consumer (both consumers). The
# groups are created here NOLOGIN when missing; outboxctl migrate then finds
# them and grants them (sql/*/functions/grants.sql). The passwords come from
# the environment (deploy/.env.example).
#
# Run once, against the first-start server, as $POSTGRES_USER in
# $POSTGRES_DB: by the official image from /docker-entrypoint-initdb.d/,
# and by deploy/postgres/entrypoint.sh the same way. A data volume made
# before this script existed has no such roles: create them by hand (the
# statements below) or start from a new volume.
set -eu
for v in PRODUCER_DB_PASSWORD RELAY_DB_PASSWORD CONSUMER_DB_PASSWORD; do
	eval "val=\${$v:-}"
	if [ -z "$val" ]; then
		echo "roles.sh: $v is not set (deploy/.env.example)" >&2
		exit 1
	fi
done
user=${POSTGRES_USER:-postgres}
psql -X -q -v ON_ERROR_STOP=1 --username "$user" --dbname "${POSTGRES_DB:-$user}" \
	-v producer_pw="$PRODUCER_DB_PASSWORD" -v relay_pw="$RELAY_DB_PASSWORD" \
	-v consumer_pw="$CONSUMER_DB_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I NOLOGIN', g)
  FROM unnest(ARRAY['outbox_producer', 'outbox_relay', 'outbox_consumer', 'outbox_admin']) g
 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = g) \gexec
CREATE ROLE producer_1 LOGIN PASSWORD :'producer_pw' IN ROLE outbox_producer;
CREATE ROLE relay_1 LOGIN PASSWORD :'relay_pw' IN ROLE outbox_relay;
CREATE ROLE consumer_1 LOGIN PASSWORD :'consumer_pw' IN ROLE outbox_consumer;
SQL
echo "roles.sh: login roles producer_1, relay_1, consumer_1 created"
