#!/usr/bin/env bash
# test/edition/compare.sh PG_BIN DIR PORT: the SQL edition's objects against
# the C build's, on a server run from PG_BIN with the C build installed
# (data and socket in DIR, port PORT; DIR/data is used when it is there,
# as test/lib/suites.sh passes migrate.sh's, else made).  As the postgres
# OS user, after make edition.  In one database, the C build (CREATE
# EXTENSION, in public) and the edition's plain script (in schema ed), in
# the database cmp (dropped at the end where roles were put aside, else
# left as the server is: a throwaway):
#   compare/roles     the roles each makes where they are not (the
#                     edition's first, its objects dropped after; roles of
#                     those names already there are renamed aside meanwhile),
#                     their attributes, memberships and comments
#   compare/catalog   test/edition/compare/catalog.sql once per schema:
#                     functions (signature, arguments with defaults, result,
#                     kind, volatility, strictness, parallel safety, security
#                     definer, leakproof, settings, rows, variadic), how each
#                     is made (language, cost, settings' values), types,
#                     relations, columns, constraints, indexes, triggers,
#                     policies, sequences, the view, privileges by role name,
#                     comments, the rows of its tables; every line one side
#                     has and the other has not must match a line of
#                     test/edition/compare/allowed, whose first field is a row
#                     of docs/managed.md's "What differs" table; an allowed
#                     pattern that matches nothing fails too (it is stale)
#   compare/claim     test/edition/compare/claim.sql: idem_claim's outcomes,
#                     rows and errors, the same on both
# Prints "ok NAME" or "not ok NAME" with "# " lines; exits non-zero when one
# failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_BIN=${1:?usage: test/edition/compare.sh PG_BIN DIR PORT}
DIR=${2:?usage: test/edition/compare.sh PG_BIN DIR PORT}
PORT=${3:?usage: test/edition/compare.sh PG_BIN DIR PORT}
export PATH="$PG_BIN:$PATH" PGHOST=$DIR PGPORT=$PORT PGUSER=postgres
version=$(sed -nE "s/^default_version = '([^']+)'/\1/p" "$root/idempotency.control")
PLAIN=$root/edition/dist/idempotency-sql--$version.sql
ALLOWED=$root/test/edition/compare/allowed
failed=0
ok() { echo "ok compare/$1"; }
notok() { failed=1; echo "not ok compare/$1"; [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/# /'; return 0; }
q() { local db=$1; shift; psql -X -qAt -v ON_ERROR_STOP=1 -d "$db" "$@" 2>&1; }

# the server: DIR/data when it is there (test/lib/suites.sh passes the one
# migrate.sh made and stopped: no initdb), else a new one
mkdir -p "$DIR"
if [ ! -d "$DIR/data" ]; then
	initdb -N -D "$DIR/data" -A trust -U postgres >"$DIR/initdb.log" 2>&1 || { notok setup "$(tail -5 "$DIR/initdb.log")"; exit 1; }
fi
pg_ctl -D "$DIR/data" -o "-p $PORT -k $DIR -c listen_addresses='' -c fsync=off" -l "$DIR/compare.log" -w start >/dev/null ||
	{ notok setup "$(tail -5 "$DIR/compare.log")"; exit 1; }
out=$DIR/compare
mkdir -p "$out"
# Roles are the cluster's: ones already there (from an earlier install) are
# renamed aside while each edition makes its own, and back at the end
aside=$(q postgres -c "SELECT count(*) FROM pg_roles WHERE rolname IN ('idempotency_app', 'idempotency_admin')")
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	# the roles put back (after the ones made here, and cmp, have gone)
	if [ "$aside" = 2 ]; then
		q postgres -c "DROP DATABASE IF EXISTS cmp" -c "DROP ROLE IF EXISTS idempotency_admin" \
			-c "DROP ROLE IF EXISTS idempotency_app" -c "ALTER ROLE cmp_aside_app RENAME TO idempotency_app" \
			-c "ALTER ROLE cmp_aside_admin RENAME TO idempotency_admin" >/dev/null
	fi
	pg_ctl -D "$DIR/data" -m fast -w stop >/dev/null 2>&1
}
trap cleanup EXIT
case $aside in
0) ;;
2) res=$(q postgres -c "ALTER ROLE idempotency_app RENAME TO cmp_aside_app" -c "ALTER ROLE idempotency_admin RENAME TO cmp_aside_admin") ||
	{ aside=0; notok setup "$res"; exit 1; } ;;
*) notok setup "one of idempotency_app and idempotency_admin is there, not both: $aside"; exit 1 ;;
esac

# the roles: the edition's (its objects dropped after), then the C build's
# shellcheck disable=SC2015 # the last of the chain exits
res=$(q postgres -c "DROP DATABASE IF EXISTS cmp" -c "CREATE DATABASE cmp") &&
	res=$(q cmp -c "CREATE SCHEMA ed" -c "SET search_path = ed" -f "$PLAIN") &&
	res=$(q cmp -f "$root/test/edition/compare/roles.sql" >"$out/roles.ed") &&
	res=$(q cmp -c "DROP SCHEMA ed CASCADE" -c "DROP ROLE idempotency_admin" -c "DROP ROLE idempotency_app") &&
	res=$(q cmp -c "CREATE EXTENSION idempotency") &&
	res=$(q cmp -f "$root/test/edition/compare/roles.sql" >"$out/roles.c") &&
	res=$(q cmp -c "CREATE SCHEMA ed" -c "SET search_path = ed" -f "$PLAIN") ||
	{ notok setup "$res$(cat "$out"/roles.* 2>/dev/null)"; exit 1; }
if res=$(diff "$out/roles.c" "$out/roles.ed"); then
	ok roles
else
	notok roles "$(printf '%s\n' "C build <, edition >" "$res")"
fi

# the catalog: lines "c: ..." and "ed: ..." that one side has alone
for s in public ed; do
	if ! psql -X -q -v ON_ERROR_STOP=1 -d cmp -v s="$s" -f "$root/test/edition/compare/catalog.sql" >"$out/catalog.$s" 2>"$out/catalog.$s.err"; then
		notok catalog "$(cat "$out/catalog.$s.err")"
		exit 1
	fi
	grep -v '^$' "$out/catalog.$s" | LC_ALL=C sort >"$out/catalog.$s.sorted"
done
LC_ALL=C comm -23 "$out/catalog.public.sorted" "$out/catalog.ed.sorted" | sed 's/^/c: /' >"$out/catalog.diff"
LC_ALL=C comm -13 "$out/catalog.public.sorted" "$out/catalog.ed.sorted" | sed 's/^/ed: /' >>"$out/catalog.diff"
# the rows of docs/managed.md's table, first cells without their backquotes
rows=$(sed -n '/^## What differs/,/^## /p' "$root/docs/managed.md" | sed -nE 's/^\| ([^|]*[^ |]) \|.*/\1/p' | tr -d '`')
# matched in bash ([[ =~ ]], POSIX extended expressions as grep -E's): no
# process per pattern
mapfile -t diffs <"$out/catalog.diff"
declare -a used=()
problems=""
n=0
while IFS=$'\t' read -r row pattern reason; do
	n=$((n + 1))
	case $row in '' | '#'*) continue ;; esac
	if [ -z "$pattern" ] || [ -z "$reason" ]; then
		problems+="allowed, line $n: not three fields (row, pattern, reason) separated by tabs"$'\n'
		continue
	fi
	[[ $'\n'$rows$'\n' == *$'\n'"$row"$'\n'* ]] ||
		problems+="allowed, line $n: \"$row\" is no row of docs/managed.md's \"What differs\" table"$'\n'
	hit=0
	for i in "${!diffs[@]}"; do
		if [[ ${diffs[$i]} =~ $pattern ]]; then
			hit=1
			used[i]=1
		fi
	done
	[ $hit = 1 ] || problems+="allowed, line $n: matches no difference (stale): $pattern"$'\n'
done <"$ALLOWED"
unexplained=""
for i in "${!diffs[@]}"; do
	[ -n "${used[i]:-}" ] || unexplained+="${diffs[$i]}"$'\n'
done
if [ -n "$unexplained" ]; then
	problems+="differences neither fixed nor in test/edition/compare/allowed (c: the C build alone, ed: the edition alone):"$'\n'
	problems+=$unexplained
fi
if [ -z "$problems" ]; then
	ok "catalog ($(wc -l <"$out/catalog.public.sorted") lines of the C build's; $(wc -l <"$out/catalog.diff") differences, each allowed)"
else
	notok catalog "${problems%$'\n'}"
fi

# idem_claim's answers on both, in the same database
claim() {
	psql -X -a -d cmp -v s="$1" -f "$root/test/edition/compare/claim.sql" 2>&1 |
		grep -vE '^(CONTEXT|LOCATION|PL/pgSQL|SQL statement)' | sed 's/^psql:[^:]*:[0-9]*: //'
}
claim public >"$out/claim.c"
claim ed >"$out/claim.ed"
if ! grep -q 'idem_claim' "$out/claim.c"; then
	notok claim "claim.sql printed nothing: $(head -5 "$out/claim.c")"
elif res=$(diff "$out/claim.c" "$out/claim.ed"); then
	ok claim
else
	notok claim "$(printf '%s\n' "C build <, edition >" "$res")"
fi
exit $failed
