#!/usr/bin/env bash
# test/edition/migrate-tle.sh PG_BIN_C PG_BIN_TLE DIR PORT: a database with
# the pg_tle edition moved by pg_dump / pg_restore as docs/managed.md says
# ("Moving between editions"): to a new database on the same server and on
# another pg_tle server, to the C build, and from the C build to pg_tle.
# PG_BIN_C is a PostgreSQL with the C build installed; PG_BIN_TLE one of the
# same major without it and with pg_tle (test/edition/prepare.sh).  One
# server runs at a time (data and socket under DIR): the first pg_tle server
# on PORT, the C build's on PORT+1, the second pg_tle server on PORT+2.  As
# the postgres OS user, after make edition.
#
# On a pg_tle server the superuser does only what RDS does: pg_tle
# preloaded, CREATE EXTENSION pg_tle in each database, rds_admin (NOSUPERUSER
# CREATEROLE CREATEDB, granted pgtle_admin), which makes the roles and the
# databases, owned by app_owner (no other privilege) and runs the pgtle
# script; app_owner runs CREATE EXTENSION idempotency, the application's
# statements, pg_dump and pg_restore.  On the C build's server the superuser
# installs and restores, as on one's own server.  The sources hold keys in
# every state (processing with a live lease and a recovery point, processing
# with its lease run out, completed, failed retryable, failed final, in two
# scopes), an application table, and docs/tenants.md's policies (a tenant's,
# an operator's), forced and recorded with idem_save_row_security().
#   tle-dump/forced-refused   pg_dump as app_owner while FORCE ROW LEVEL
#                             SECURITY is on stops (it may not bypass it):
#                             the procedure turns FORCE off around the dump
#   tle-dump/ok               ... and then dumps, FORCE back on after
#   tle-to-tle/whole-dump-refused   the whole dump restored by app_owner
#                             into a database with the edition installed
#                             stops (pg_tle's schema, its registration
#                             functions: the reason for restore-list.sh)
#   NAME/restore              pg_restore --exit-on-error -L (the list from
#                             edition/restore-list.sh) succeeded, for
#                             tle-to-tle-same (app_owner), tle-to-c (the
#                             superuser), tle-to-tle-other (rds_admin with
#                             --role=app_owner), c-to-tle (app_owner,
#                             --no-owner)
#   NAME/rows                 every column of every row, the token
#                             sequence and the application's rows equal
#                             the source's
#   NAME/policies             the policies are on the table, row level
#                             security enabled and forced, as at the source
#   NAME/secret               (pg_tle targets) the key-lock secret is the
#                             target's own, one row, not the source's
#   NAME/answers              the same retries answer alike: replays byte
#                             for byte, stale and retryable keys reclaimed
#                             with tokens above every token before the
#                             move, a tenant sees and claims only its scope
# Prints "ok NAME" or "not ok NAME" with "# " lines; exits non-zero when one
# failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
usage="usage: test/edition/migrate-tle.sh PG_BIN_C PG_BIN_TLE DIR PORT"
PG_BIN_C=${1:?$usage}
PG_BIN_TLE=${2:?$usage}
DIR=${3:?$usage}
PORT=${4:?$usage}
export PGTZ=UTC PGHOST=$DIR
version=$(sed -nE "s/^default_version = '([^']+)'/\1/p" "$root/idempotency.control")
TLE=$root/edition/dist/idempotency-pgtle--$version.sql
failed=0
ok() { echo "ok migrate-tle/$1"; }
notok() { failed=1; echo "not ok migrate-tle/$1"; [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/# /'; return 0; }
same() { # same NAME WANT GOT
	if [ "$2" = "$3" ]; then ok "$1"; else notok "$1" "$(diff <(echo "$2") <(echo "$3"))"; fi
}

[ -f "$TLE" ] || { notok "setup (no $TLE: make edition first)"; exit 1; }
[ -f "$("$PG_BIN_TLE/pg_config" --pkglibdir)/pg_tle.so" ] ||
	{ notok "setup (no pg_tle in $PG_BIN_TLE's PostgreSQL: test/edition/prepare.sh)"; exit 1; }
[ -e "$("$PG_BIN_TLE/pg_config" --sharedir)/extension/idempotency.control" ] &&
	{ notok "setup (the C build is installed in $PG_BIN_TLE's PostgreSQL)"; exit 1; }
[ -e "$("$PG_BIN_C/pg_config" --sharedir)/extension/idempotency.control" ] ||
	{ notok "setup (the C build is not installed in $PG_BIN_C's PostgreSQL)"; exit 1; }
major() { "$1/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/'; }
[ "$(major "$PG_BIN_C")" = "$(major "$PG_BIN_TLE")" ] ||
	{ notok "setup ($PG_BIN_C and $PG_BIN_TLE are not the same major)"; exit 1; }

# --- servers: one at a time ------------------------------------------------
BIN="" DATA=""
start() { # start NAME BIN PORT PRELOAD
	BIN=$2 DATA=$DIR/$1
	export PGPORT=$3
	rm -rf "$DATA"
	mkdir -p "$DIR"
	"$BIN/initdb" -D "$DATA" -A trust -U postgres --no-sync >"$DIR/$1.initdb.log" 2>&1 ||
		{ notok "setup ($1: initdb)" "$(tail -n 5 "$DIR/$1.initdb.log")"; exit 1; }
	cat >>"$DATA/postgresql.conf" <<CONF
port = $3
listen_addresses = ''
unix_socket_directories = '$DIR'
shared_preload_libraries = '$4'
CONF
	"$BIN/pg_ctl" -D "$DATA" -l "$DIR/$1.log" -w start >/dev/null ||
		{ notok "setup ($1: the server did not start)" "$(tail -n 5 "$DIR/$1.log")"; exit 1; }
}
stop() { [ -n "$DATA" ] && "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1; DATA=""; }
trap stop EXIT

# q ROLE DB [psql args]: stops at the first error
q() { local role=$1 db=$2; shift 2; "$BIN/psql" -X -qAt -v ON_ERROR_STOP=1 -U "$role" -d "$db" "$@" 2>&1; }

# the service's part on a pg_tle server (once per server), then rds_admin's
tle_service() {
	local out
	out=$(q postgres postgres -c "CREATE ROLE rds_admin LOGIN NOSUPERUSER CREATEROLE CREATEDB" &&
		q rds_admin postgres <<'SQL'
CREATE ROLE app_owner LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB;
GRANT app_owner TO rds_admin;
CREATE ROLE idempotency_app NOLOGIN;
CREATE ROLE idempotency_admin NOLOGIN IN ROLE idempotency_app;
CREATE ROLE mv_tenant LOGIN IN ROLE idempotency_app;
CREATE ROLE mv_ops LOGIN IN ROLE idempotency_admin;
SQL
	) || { notok "setup (the service's roles)" "$out"; exit 1; }
}
# a new database on a pg_tle server with the edition installed, as RDS's
# users do it
tle_db() {
	local db=$1 out
	if out=$(q rds_admin postgres -c "CREATE DATABASE $db OWNER app_owner") &&
		out=$(q postgres "$db" -c "CREATE EXTENSION pg_tle" -c "GRANT pgtle_admin TO rds_admin") &&
		out=$(q rds_admin "$db" -f "$TLE") &&
		out=$(q app_owner "$db" -c "CREATE EXTENSION idempotency"); then
		return 0
	fi
	notok "$db/install (the service, rds_admin, app_owner)" "$out"
	return 1
}

# keys in every state, the application's table, the tenant recipe's policies
SOURCE=$(cat "$root/test/edition/keys-every-state.sql"; cat <<'SQL'
CREATE POLICY admin_all ON idempotency_keys TO idempotency_admin USING (true) WITH CHECK (true);
SELECT idem_save_row_security();
SQL
)

# as the superuser (it bypasses row level security): what must come across
state() {
	q postgres "$1" -c "SELECT scope, key, status, retryable, response_code, token, locked_until, created_at, updated_at,
	                  expires_at, encode(request_hash, 'hex'), recovery_point, response::text, due_at, attempts
	             FROM idempotency_keys ORDER BY scope, key" \
	       -c "SELECT last_value, is_called FROM idempotency_token_seq" \
	       -c "SELECT id, key, amount FROM payments ORDER BY id"
}
policies() {
	q postgres "$1" -c "SELECT c.relrowsecurity, c.relforcerowsecurity, p.polname, p.polroles::regrole[]::text,
	                           pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid)
	                      FROM pg_class c LEFT JOIN pg_policy p ON p.polrelid = c.oid
	                     WHERE c.oid = 'idempotency_keys'::regclass ORDER BY p.polname"
}
secret() { q postgres "$1" -c "SELECT count(*), string_agg(encode(secret, 'hex'), ',') FROM idempotency_key_lock_secret"; }
# what a source must show before it is moved: seven keys, the sequence, one
# payment; two policies, row level security enabled and forced; one secret
source_shown() {
	local name=$1 st=$2 pol=$3
	if [ "$(printf '%s\n' "$st" | wc -l)" -eq 9 ] && [[ $st != *ERROR* ]] &&
		[ "$(printf '%s\n' "$pol" | grep -c '^t|t|')" -eq 2 ] && [[ $pol != *ERROR* ]]; then
		return 0
	fi
	notok "setup ($name: the source does not show what is to be moved)" "$st
$pol"
	exit 1
}

# restore NAME DUMP DB ROLE [pg_restore args]: the procedure's restore
restore() {
	local name=$1 dump=$2 db=$3 role=$4 out
	shift 4
	"$BIN/pg_restore" -l "$dump" | bash "$root/edition/restore-list.sh" >"$dump.list"
	if out=$("$BIN/pg_restore" --exit-on-error -U "$role" "$@" -d "$db" -L "$dump.list" "$dump" 2>&1); then
		ok "$name/restore"
		return 0
	fi
	notok "$name/restore" "$out"
	return 1
}

# the same retries, as the operator (admin_all) and the tenant (mv_scope)
WANT="live|in_progress|processing
done|replay|201|{\"s\": \"ü\\n\", \"big\": 10000000000000000000000000000000000000000, \"amount\": 3.10, \"payment_id\": 1}
final|replay|402|{\"error\": \"card_declined\"}
stale|reclaimed||t
retry|reclaimed|t
fresh|new
tenant sees|4
tenant claims|new
tenant elsewhere|42501"
answers() {
	local db=$1 other
	q mv_ops "$db" <"$root/test/edition/keys-every-state-claims.sql"
	q mv_tenant "$db" <<'SQL'
SELECT 'tenant sees', count(*) FROM idempotency_keys;
SELECT 'tenant claims', outcome FROM idem_claim('tenant', NULL, 'm1');
SQL
	other=$(printf '\\set VERBOSITY verbose\nSELECT outcome FROM idem_claim(%s, NULL, %s);\n' "'tenant'" "'m2'" | q mv_tenant "$db" -f -)
	case $other in
	*"ERROR:  42501:"*) echo "tenant elsewhere|42501" ;;
	*) echo "tenant elsewhere|$other" ;;
	esac
}

# the checks after a restore into DB, against the source's STATE and POLICIES
moved() {
	local name=$1 db=$2 want_state=$3 want_policies=$4 src_secret=${5-}
	same "$name/rows" "$want_state" "$(state "$db")"
	same "$name/policies" "$want_policies" "$(policies "$db")"
	if [ -n "$src_secret" ]; then
		local s
		s=$(secret "$db")
		if [ "${s%%|*}" = 1 ] && [ "$s" != "$src_secret" ] && [ "${#s}" -eq 66 ]; then
			ok "$name/secret (the target's own)"
		else
			notok "$name/secret" "source: $src_secret
target: $s"
		fi
	fi
	same "$name/answers" "$WANT" "$(answers "$db")"
}

# --- the first pg_tle server: the source, and a database beside it --------
start tle1 "$PG_BIN_TLE" "$PORT" pg_tle
tle_service
tle_db shop || exit 1
out=$(q app_owner shop <<<"$SOURCE") || { notok "setup (the source's keys, as app_owner)" "$out"; exit 1; }
tle_state=$(state shop)
tle_policies=$(policies shop)
tle_secret=$(secret shop)
source_shown pg_tle "$tle_state" "$tle_policies"
[ "${#tle_secret}" -eq 66 ] || { notok "setup (the source's key-lock secret)" "$tle_secret"; exit 1; }
TLEDUMP=$DIR/shop-tle.dump

# the table's owner may not bypass forced row level security: pg_dump stops
out=$("$BIN/pg_dump" -U app_owner -Fc -f "$DIR/forced.dump" -d shop 2>&1)
case $? in
0) notok "tle-dump/forced-refused (pg_dump as app_owner dumped a table with FORCE ROW LEVEL SECURITY)" ;;
*) case $out in
	*"query would be affected by row-level security policy for table \"idempotency_keys\""*) ok "tle-dump/forced-refused" ;;
	*) notok "tle-dump/forced-refused (another error)" "$out" ;;
	esac ;;
esac
# the procedure: FORCE off for the dump, on again after
if out=$(q app_owner shop -c "ALTER TABLE idempotency_keys NO FORCE ROW LEVEL SECURITY" &&
	"$BIN/pg_dump" -U app_owner -Fc -f "$TLEDUMP" -d shop 2>&1); then
	ok "tle-dump/ok"
else
	notok "tle-dump/ok" "$out"
fi
q app_owner shop -c "ALTER TABLE idempotency_keys FORCE ROW LEVEL SECURITY" >/dev/null
same "tle-dump/forced-again" "$tle_policies" "$(policies shop)"
[ -s "$TLEDUMP" ] || { notok "tle-dump (no dump)"; exit 1; }

# the whole dump, without the list, into a database with the edition: stops
if tle_db whole; then
	if out=$("$BIN/pg_restore" --exit-on-error -U app_owner -d whole "$TLEDUMP" 2>&1); then
		notok "tle-to-tle/whole-dump-refused (restored without the list: docs/managed.md says it stops)"
	else
		ok "tle-to-tle/whole-dump-refused ($(printf '%s\n' "$out" | sed -n 's/^pg_restore: error: could not execute query: ERROR:  //p' | head -n 1))"
	fi
fi

# pg_tle -> pg_tle, same server, as the database's owner
if tle_db shop_same && restore tle-to-tle-same "$TLEDUMP" shop_same app_owner; then
	moved tle-to-tle-same shop_same "$tle_state" "$tle_policies" "$tle_secret"
fi
stop

# --- the C build's server: pg_tle -> C, and the C source -------------------
start c "$PG_BIN_C" $((PORT + 1)) ""
out=$(q postgres postgres <<'SQL'
CREATE ROLE app_owner LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB;
CREATE DATABASE shop_c OWNER app_owner;
CREATE DATABASE shop_from_tle OWNER app_owner;
\c shop_c
CREATE EXTENSION idempotency;
CREATE ROLE mv_tenant LOGIN IN ROLE idempotency_app;
CREATE ROLE mv_ops LOGIN IN ROLE idempotency_admin;
\c shop_from_tle
CREATE EXTENSION idempotency;
SQL
) || { notok "setup (the C build's server)" "$out"; exit 1; }
if restore tle-to-c "$TLEDUMP" shop_from_tle postgres; then
	moved tle-to-c shop_from_tle "$tle_state" "$tle_policies"
fi
out=$(q postgres shop_c <<<"$SOURCE") || { notok "setup (the C source's keys)" "$out"; exit 1; }
c_state=$(state shop_c)
c_policies=$(policies shop_c)
source_shown "C build" "$c_state" "$c_policies"
CDUMP=$DIR/shop-c.dump
out=$("$BIN/pg_dump" -U postgres -Fc -f "$CDUMP" -d shop_c 2>&1) || { notok "c-dump" "$out"; exit 1; }
stop

# --- another pg_tle server: pg_tle -> pg_tle there, C -> pg_tle ------------
start tle2 "$PG_BIN_TLE" $((PORT + 2)) pg_tle
tle_service
# rds_admin restores on the owner's behalf
if tle_db shop_other && restore tle-to-tle-other "$TLEDUMP" shop_other rds_admin --role=app_owner; then
	moved tle-to-tle-other shop_other "$tle_state" "$tle_policies" "$tle_secret"
fi
# the C build's dump: its objects belong to the superuser, whom app_owner is not
if tle_db shop_from_c && restore c-to-tle "$CDUMP" shop_from_c app_owner --no-owner; then
	moved c-to-tle shop_from_c "$c_state" "$c_policies" "$tle_secret"
fi
stop

exit $failed
