#!/usr/bin/env bash
# test/edition/migrate.sh PG_BIN DIR PORT: a database moved from the C build
# to the SQL edition (plain script) and back by pg_dump / pg_restore as
# docs/managed.md says (edition/restore-list.sh), on a throwaway server run
# from PG_BIN with the C build installed (data and socket in DIR, port
# PORT).  As the postgres OS user, after make edition.  Keys in every state
# (processing with a live lease and a recovery point, processing with its
# lease run out, completed, failed retryable, failed final, in two scopes)
# and a tenant policy recorded with idem_save_row_security():
#   c-to-sql/rows, sql-to-c/rows      every column of every row, and the
#                                     token sequence, equal after each move
#   c-to-sql/policies, sql-to-c/...   the policy is on the table after it
#   answers                           the same claims against the moved
#                                     databases answer alike in both
#                                     editions: replays byte for byte, the
#                                     stale key reclaimed with a token above
#                                     every token before the move
# Prints "ok NAME" or "not ok NAME" with "# " lines; exits non-zero when one
# failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_BIN=${1:?usage: test/edition/migrate.sh PG_BIN DIR PORT}
DIR=${2:?usage: test/edition/migrate.sh PG_BIN DIR PORT}
PORT=${3:?usage: test/edition/migrate.sh PG_BIN DIR PORT}
export PATH="$PG_BIN:$PATH" PGHOST=$DIR PGPORT=$PORT
version=$(sed -nE "s/^default_version = '([^']+)'/\1/p" "$root/idempotency.control")
PLAIN=$root/edition/dist/idempotency-sql--$version.sql
failed=0
ok() { echo "ok migrate/$1"; }
notok() { failed=1; echo "not ok migrate/$1"; [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/# /'; return 0; }
q() { local db=$1; shift; psql -X -qAt -v ON_ERROR_STOP=1 -d "$db" "$@" 2>&1; }

mkdir -p "$DIR"
if [ ! -d "$DIR/data" ]; then
	initdb -D "$DIR/data" -A trust -U postgres >"$DIR/initdb.log" 2>&1 || { notok setup "$(tail -5 "$DIR/initdb.log")"; exit 1; }
fi
pg_ctl -D "$DIR/data" -o "-p $PORT -k $DIR -c listen_addresses=''" -l "$DIR/log" -w start >/dev/null ||
	{ notok setup "$(tail -5 "$DIR/log")"; exit 1; }
trap 'pg_ctl -D "$DIR/data" -m fast -w stop >/dev/null 2>&1' EXIT
export PGUSER=postgres
for db in mv_c mv_sql mv_c2; do q postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null; q postgres -c "CREATE DATABASE $db" >/dev/null; done
q postgres -c "DROP ROLE IF EXISTS mv_tenant" >/dev/null
q postgres -c "CREATE ROLE mv_tenant; GRANT idempotency_app TO mv_tenant" >/dev/null 2>&1 ||
	q postgres -c "CREATE ROLE mv_tenant" >/dev/null

# The source: the C build, keys in every state, the application's table, a tenant policy
out=$({ echo "CREATE EXTENSION idempotency; GRANT idempotency_app TO mv_tenant;"
	cat "$root/test/edition/keys-every-state.sql"
	echo "SELECT idem_save_row_security();"; } | q mv_c) || { notok setup "$out"; exit 1; }

state() {
	q "$1" -c "SELECT scope, key, status, retryable, response_code, token, locked_until, created_at, updated_at,
	                  expires_at, encode(request_hash, 'hex'), recovery_point, response::text, due_at, attempts
	             FROM idempotency_keys ORDER BY scope, key" \
	       -c "SELECT last_value, is_called FROM idempotency_token_seq" \
	       -c "SELECT id, key, amount FROM payments ORDER BY id"
}
policies() { q "$1" -c "SELECT c.relrowsecurity, c.relforcerowsecurity, p.polname, pg_get_expr(p.polqual, p.polrelid)
                          FROM pg_class c LEFT JOIN pg_policy p ON p.polrelid = c.oid
                         WHERE c.oid = 'idempotency_keys'::regclass"; }
before=$(state mv_c)
before_policies=$(policies mv_c)

# move $1 (source db) to $2 (target db, the edition already installed there)
move() {
	local src=$1 dst=$2 name=$3 out
	pg_dump -Fc -f "$DIR/$src.dump" -d "$src" 2>"$DIR/$src.dump.log" || { notok "$name/dump" "$(cat "$DIR/$src.dump.log")"; return 1; }
	pg_restore -l "$DIR/$src.dump" | bash "$root/edition/restore-list.sh" >"$DIR/$src.list"
	if ! out=$(pg_restore --exit-on-error -d "$dst" -L "$DIR/$src.list" "$DIR/$src.dump" 2>&1); then
		notok "$name/restore" "$out"
		return 1
	fi
	ok "$name/restore"
}

# C build -> SQL edition (plain script)
q mv_sql -f "$PLAIN" >"$DIR/plain.log" || { notok c-to-sql/install "$(tail -5 "$DIR/plain.log")"; exit 1; }
if move mv_c mv_sql c-to-sql; then
	after=$(state mv_sql)
	[ "$after" = "$before" ] && ok c-to-sql/rows || notok c-to-sql/rows "$(diff <(echo "$before") <(echo "$after"))"
	after_policies=$(policies mv_sql)
	[ "$after_policies" = "$before_policies" ] && ok c-to-sql/policies ||
		notok c-to-sql/policies "$(diff <(echo "$before_policies") <(echo "$after_policies"))"
fi

# SQL edition -> C build
q mv_sql -c "SELECT idem_save_row_security()" >/dev/null
q mv_c2 -c "CREATE EXTENSION idempotency" >/dev/null
if move mv_sql mv_c2 sql-to-c; then
	# from a plain-script source the policies come as the dump's own
	# entries, which do not FORCE row level security: docs/managed.md's step
	q mv_c2 -c "ALTER TABLE idempotency_keys FORCE ROW LEVEL SECURITY" -c "SELECT idem_save_row_security()" >/dev/null
	after=$(state mv_c2)
	[ "$after" = "$before" ] && ok sql-to-c/rows || notok sql-to-c/rows "$(diff <(echo "$before") <(echo "$after"))"
	after_policies=$(policies mv_c2)
	[ "$after_policies" = "$before_policies" ] && ok sql-to-c/policies ||
		notok sql-to-c/policies "$(diff <(echo "$before_policies") <(echo "$after_policies"))"
fi

# The same claims against both editions after the moves
answers() {
	cat "$root/test/edition/keys-every-state-claims.sql" - <<'SQL' | q "$1"
SET ROLE mv_tenant;
SELECT 'tenant sees', count(*) FROM idempotency_keys;
SQL
}
a_sql=$(answers mv_sql)
a_c=$(answers mv_c2)
want="live|in_progress|processing
done|replay|201|{\"s\": \"ü\\n\", \"big\": 10000000000000000000000000000000000000000, \"amount\": 3.10, \"payment_id\": 1}
final|replay|402|{\"error\": \"card_declined\"}
stale|reclaimed||t
retry|reclaimed|t
fresh|new
tenant sees|4"
[ "$a_sql" = "$want" ] && ok answers/sql-edition || notok answers/sql-edition "$(diff <(echo "$want") <(echo "$a_sql"))"
[ "$a_c" = "$want" ] && ok answers/c-build || notok answers/c-build "$(diff <(echo "$want") <(echo "$a_c"))"
exit $failed
