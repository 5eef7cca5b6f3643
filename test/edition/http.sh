#!/usr/bin/env bash
# test/edition/http.sh PG_BIN DIR PORT: the Node.js example service
# (examples/http/server.js) against the HTTP conformance suite
# (examples/conformance/*.test.js, node --test), backed by the SQL edition
# installed as on Cloud SQL: the plain script (edition/dist/
# idempotency-sql--VERSION.sql) run by the database's owner, a role with
# CREATEROLE and nothing else (no superuser), on one throwaway server (data
# and socket in DIR, TCP port PORT on 127.0.0.1) run from PG_BIN, a
# PostgreSQL without the C build's files (test/edition/prepare.sh makes
# one).  As the postgres OS user, after make edition, with Node.js and the
# service's modules (examples/http/node_modules, or NODE_PATH) in place:
# test/lib/suites.sh's suite_http runs it beside the three services' runs
# against the C build (on a server of its own: nothing is shared).
#
# The superuser does only what the provider does: creates the owner role
# and its database.  The owner installs the plain script, creates the
# service's login role and runs examples/db/schema.sql without its
# CREATE EXTENSION line (the plain script stands for it: there is no
# extension to create).  The service logs in with the grants that script
# gives.  The conformance suite's own checks (psql: rows of payments and
# idempotency_keys, pg_stat_activity, LOCK TABLE payments) run as postgres,
# as they do against the C build: they observe, the service is what is
# tested.  Prints "ok NAME (N cases)" or "not ok NAME" (then "# " lines:
# the test's output, the services' log) per test file, after "ok setup";
# exits non-zero when one failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_BIN=${1:?usage: test/edition/http.sh PG_BIN DIR PORT}
DIR=${2:?usage: test/edition/http.sh PG_BIN DIR PORT}
PORT=${3:?usage: test/edition/http.sh PG_BIN DIR PORT}
export PATH="$PG_BIN:$PATH"
version=$(sed -nE "s/^default_version = '([^']+)'/\1/p" "$root/idempotency.control")
PLAIN=$root/edition/dist/idempotency-sql--$version.sql
DATA=$DIR/data
failed=0
# shellcheck source=test/edition/lib.sh
. "$root/test/edition/lib.sh"
# shellcheck source=test/lib/tap.sh
. "$root/test/lib/tap.sh"

if [ ! -f "$PLAIN" ]; then notok "setup (no $PLAIN: make edition first)"; exit 1; fi
pkglib=$(pg_config --pkglibdir)
sharedir=$(pg_config --sharedir)
if compgen -G "$sharedir/extension/idempotency*" >/dev/null || compgen -G "$pkglib/idempotency*" >/dev/null; then
	notok "setup (the C build is installed in $PG_BIN's PostgreSQL; use test/edition/prepare.sh)"
	exit 1
fi
edition_server setup "listen_addresses = '127.0.0.1'" "shared_preload_libraries = ''"

# the provider: the owner role (as Cloud SQL's cloudsqlsuperuser: CREATEROLE,
# no superuser) and its database
if ! out=$(q postgres postgres -c "CREATE ROLE payments_owner LOGIN NOSUPERUSER CREATEROLE NOCREATEDB" \
	-c "CREATE DATABASE payments OWNER payments_owner"); then
	notok "setup (the owner role and database)" "$out"
	exit 1
fi
# the owner: the plain script, the service's role, examples/db/schema.sql
# without CREATE EXTENSION (exactly that one line left out)
schema=$(grep -v '^CREATE EXTENSION IF NOT EXISTS idempotency;$' "$root/examples/db/schema.sql")
if [ "$(grep -c '^CREATE EXTENSION' "$root/examples/db/schema.sql")" != 1 ] ||
	[ "$(printf '%s\n' "$schema" | grep -v '^ *--' | grep -ci 'extension')" != 0 ]; then
	notok "setup (examples/db/schema.sql no longer has exactly one CREATE EXTENSION IF NOT EXISTS idempotency; line)"
	exit 1
fi
if ! out=$(q payments_owner payments -f "$PLAIN"); then
	notok "setup (the plain script, as the database's owner)" "$out"
	exit 1
fi
if ! out=$(q payments_owner payments -c "CREATE ROLE payments_service LOGIN NOSUPERUSER" &&
	printf '%s\n' "$schema" | q payments_owner payments -v service_role=payments_service -f -); then
	notok "setup (examples/db/schema.sql as the database's owner)" "$out"
	exit 1
fi
# what answers is the edition, owned by the owner: no extension, no C function
got=$(q postgres payments -c "SELECT (SELECT count(*) FROM pg_extension WHERE extname = 'idempotency')
	|| '|' || (SELECT count(*) FROM pg_available_extensions WHERE name = 'idempotency')
	|| '|' || (SELECT string_agg(DISTINCT l.lanname || ':' || pg_get_userbyid(p.proowner), ',')
	           FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.proname LIKE 'idem\_%')
	|| '|' || (SELECT rolsuper FROM pg_roles WHERE rolname = 'payments_owner')
	|| '|' || (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = 'payments_service')")
want="0|0|plpgsql:payments_owner,sql:payments_owner|false|false"
if [ "$got" != "$want" ]; then
	notok "setup (the edition in place of the C build)" "want: $want
got:  $got"
	exit 1
fi
echo "ok setup (the plain script and examples/db/schema.sql by payments_owner, CREATEROLE, no superuser; no C build)"

# card.test.js watches the retry's claim wait in pg_stat_activity as the C
# build shows it, wait_event_type 'Extension' (its own wait event); the
# edition's await_result polls the row with pg_sleep every 10 ms, shown as
# wait_event 'PgSleep'.  The edition runs a copy of the file with that one
# condition changed (and lib.js required from examples/conformance), every
# other line as it is.
C_WAIT="wait_event_type = 'Extension' AND query LIKE '%await_result%'"
ED_WAIT="wait_event = 'PgSleep' AND query LIKE '%await_result%'"
mkdir -p "$DIR/conformance"
sed -e "s/$C_WAIT/$ED_WAIT/" -e "s|require('./lib')|require('$root/examples/conformance/lib')|" \
	"$root/examples/conformance/card.test.js" >"$DIR/conformance/card.test.js"
if [ "$(grep -cF "$C_WAIT" "$root/examples/conformance/card.test.js")" != 1 ] ||
	[ "$(grep -cF "$ED_WAIT" "$DIR/conformance/card.test.js")" != 1 ] ||
	[ "$(diff "$root/examples/conformance/card.test.js" "$DIR/conformance/card.test.js" | grep -c '^>')" != 2 ]; then
	notok "setup (examples/conformance/card.test.js: the condition on the claim's wait, $C_WAIT, is not there once)"
	exit 1
fi

cmd='["node", "'"$root"'/examples/http/server.js"]'
for f in "$root"/examples/conformance/*.test.js; do
	name=$(basename "$f" .test.js)
	log=$DIR/$name
	dir=$root/examples/conformance what=""
	[ "$name" = card ] && dir=$DIR/conformance what="; the retry's wait seen as wait_event PgSleep"
	: >"$log.services"
	if env -C "$dir" PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=payments_service \
		PGDATABASE=payments PGSSLMODE=disable CONFORMANCE_ADMIN_USER=postgres \
		CONFORMANCE_LOG="$log.services" EXAMPLE_CMD="$cmd" node --test "$name.test.js" >"$log.log" 2>&1; then
		echo "ok node/$name ($(grep -c '^ok ' "$log.log") cases$what)"
	else
		notok "node/$name" "$(show_tap "$log.log")
services' log (last 40 lines):
$(tail -n 40 "$log.services")"
	fi
done
exit "$failed"
