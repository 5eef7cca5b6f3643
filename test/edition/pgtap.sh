#!/usr/bin/env bash
# test/edition/pgtap.sh PG_BIN DIR PORT: the C build's pgTAP files
# (test/pgtap/*.sql, unchanged) against the SQL edition, installed each way,
# on one throwaway server run from PG_BIN (data and socket in DIR, port
# PORT) with shared_preload_libraries = 'pg_tle'.  PG_BIN must have no C
# build installed (test/edition/prepare.sh makes such a copy).  As the
# postgres OS user, after make edition.  For each file and each install, a
# database of its own:
#   plain  svc_admin (NOSUPERUSER CREATEROLE CREATEDB, as Cloud SQL's
#          cloudsqlsuperuser) owns the database and runs
#          edition/dist/idempotency-sql--VERSION.sql into its public schema
#   tle    svc_admin, granted pgtle_admin (as RDS's rds_superuser), owns the
#          database, runs edition/dist/idempotency-pgtle--VERSION.sql and
#          CREATE EXTENSION idempotency
# The superuser makes pgtap (and pg_tle) in it, then runs the file with
# psql as the C build's suite runs it with pg_prove.  Prints "ok
# pgtap/INSTALL/NAME" or "not ok pgtap/INSTALL/NAME" (the reasons as "# "
# lines); exits non-zero when one failed.
#
# The edition differs from the C build by design where docs/managed.md
# ("What differs") says so.  test/edition/expected-pgtap/NAME.txt lists, for
# file NAME, the tests that then fail on the edition, one a line, fields
# separated by a TAB:
#   INSTALL  DESCRIPTION  DIAGNOSTIC  REASON
# INSTALL is plain, tle or both; DESCRIPTION the test's description, exactly;
# DIAGNOSTIC a string pgTAP's diagnostics of that failure must contain (what
# the edition does instead), "= LINE" for a line they must show exactly (a
# list that must not grow), or - for none; REASON the row of What differs.
# Special lines: "INSTALL  plan  N  REASON" (the file runs N tests there, not
# its plan: tests made per object) and "INSTALL  not-run  -  REASON"; INSTALL
# ending in ? (tle?) marks a test at a limit that may pass or fail there.  A
# file passes when it ran to its end, every test that failed is listed with
# its diagnostic, and every test listed failed: an entry that no longer
# fails is reported, so the list cannot go stale.  Lines starting with #
# are comments.
#
# Cost: the pg_tle install runs on PostgreSQL 15 and 18 only (EDITION_PGTAP_TLE
# =all runs it everywhere): bad_input.sql alone takes ~25 s per install on the
# edition; the plain install runs everywhere.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_BIN=${1:?usage: test/edition/pgtap.sh PG_BIN DIR PORT}
DIR=${2:?usage: test/edition/pgtap.sh PG_BIN DIR PORT}
PORT=${3:?usage: test/edition/pgtap.sh PG_BIN DIR PORT}
export PATH="$PG_BIN:$PATH"
version=$(sed -nE "s/^default_version = '([^']+)'/\1/p" "$root/idempotency.control")
PLAIN=$root/edition/dist/idempotency-sql--$version.sql
TLE=$root/edition/dist/idempotency-pgtle--$version.sql
EXPECTED=$root/test/edition/expected-pgtap
DATA=$DIR/data
failed=0
# shellcheck source=test/edition/lib.sh
. "$root/test/edition/lib.sh"

[ -f "$PLAIN" ] && [ -f "$TLE" ] || { notok "pgtap (no $PLAIN: make edition first)"; exit 1; }
sharedir=$(pg_config --sharedir)
major=$(pg_config --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
if [ -e "$sharedir/extension/idempotency.control" ]; then
	notok "pgtap (the C build is installed in $PG_BIN's PostgreSQL: use test/edition/prepare.sh's copy)"
	exit 1
fi
if [ ! -f "$sharedir/extension/pgtap.control" ]; then
	echo "skip pgtap (Debian ships no postgresql-$major-pgtap here)"
	exit 0
fi
INSTALLS="plain tle"
case $major:${EDITION_PGTAP_TLE:-} in
15:* | 18:* | *:all) ;;
*)
	INSTALLS=plain
	echo "# not run on the edition: pgtap/tle/* on PostgreSQL $major (the pgTAP files against the pg_tle install run on 15 and 18 only, to keep the test command short: ~30 s a version; the plain install, the same functions, runs here)"
	;;
esac

edition_server pgtap/server "listen_addresses = ''" "shared_preload_libraries = 'pg_tle'"
if ! out=$(q postgres postgres -c "CREATE ROLE svc_admin LOGIN NOSUPERUSER CREATEROLE CREATEDB"); then
	notok "pgtap/server (the service's admin role)" "$out"
	exit 1
fi

# install HOW DB: the database, made by svc_admin, with the edition
# installed as HOW, and pgtap
install() {
	local how=$1 db=$2
	q svc_admin postgres -c "CREATE DATABASE $db" || return 1
	q postgres "$db" -c "CREATE EXTENSION pgtap" || return 1
	if [ "$how" = plain ]; then
		q svc_admin "$db" -f "$PLAIN" || return 1
	else
		q postgres "$db" -c "CREATE EXTENSION pg_tle" -c "GRANT pgtle_admin TO svc_admin" &&
			q svc_admin "$db" -f "$TLE" -c "CREATE EXTENSION idempotency" || return 1
	fi
}

# check HOW NAME TAP: TAP against expected-pgtap/NAME.txt; prints the
# problems, one a line, and returns 1 when there are any
check() {
	local how=$1 name=$2 tap=$3
	awk -v how="$how" -v name="$name" -v expected="$(expected_file "$name")" '
	BEGIN {
		while ((getline line < expected) > 0) {
			if (line ~ /^#/ || line == "") continue
			split(line, e, "\t")
			m = sub(/\?$/, "", e[1])
			if (e[1] != how && e[1] != "both") continue
			if (m) maybe[e[2]] = 1
			if (e[2] == "plan") { plan = e[3]; continue }
			if (e[2] == "not-run") continue
			want[e[2]] = e[3]; nwant++
		}
	}
	# the diagnostics show want: contain it, or with "= ", have a line that
	# is exactly the rest (a list that must not grow)
	function shows(diags, w,    n, i, l, ls) {
		if (substr(w, 1, 2) != "= ") return index(diags, w) > 0
		n = split(diags, ls, "\n")
		for (i = 1; i <= n; i++) { l = ls[i]; sub(/^# +/, "", l); if (l == substr(w, 3)) return 1 }
		return 0
	}
	/^1\.\.[0-9]+$/ && !planned { planned = substr($0, 4) + 0; next }
	/^(not )?ok [0-9]+ - / {
		cur = $0; sub(/^(not )?ok [0-9]+ - /, "", cur)
		ran++
		if ($0 ~ /^not ok/) { failed[cur] = 1; diag[cur] = "" } else { passed[cur] = 1; cur = "" }
		next
	}
	/^# / && cur != "" { diag[cur] = diag[cur] "\n" $0; next }
	/^(psql:|ERROR:)/ { errors = errors "\n" $0 }
	END {
		bad = 0
		if (plan == "") plan = planned
		if (ran != plan) { print "ran " ran " tests, expected " plan " (plan " planned ")" errors; bad = 1 }
		for (d in failed)
			if (!(d in want)) { print "not ok (not in expected-pgtap/" name ".txt): " d diag[d]; bad = 1 }
			else if (want[d] != "-" && !shows(diag[d], want[d])) {
				print "not ok, but not as expected-pgtap says (want in the diagnostics: " want[d] "): " d diag[d]; bad = 1 }
		for (d in want)
			if (!(d in failed) && !(d in maybe)) { print "listed in expected-pgtap as failing on " how ", but " ((d in passed) ? "passed" : "did not run") ": " d; bad = 1 }
		for (d in want) if (d in failed) ndiff++
		printf "%d tests, %d differ by design\n", ran, ndiff > "/dev/stderr"
		exit bad
	}' "$tap"
}
expected_file() { if [ -f "$EXPECTED/$1.txt" ]; then echo "$EXPECTED/$1.txt"; else echo /dev/null; fi; }

for f in "$root"/test/pgtap/*.sql; do
	[ -e "$f" ] || continue
	name=$(basename "$f" .sql)
	for how in $INSTALLS; do
		why=$(awk -v how="$how" -v FS='\t' '($1 == how || $1 == "both") && $2 == "not-run" { print $4 }' "$(expected_file "$name")")
		if [ -n "$why" ]; then
			echo "# not run on the edition: pgtap/$how/$name ($why)"
			continue
		fi
		db=tap_${how}_$name
		if ! out=$(install "$how" "$db"); then
			notok "pgtap/$how/$name (the install)" "$out"
			continue
		fi
		SECONDS=0
		psql -X -h "$DIR" -p "$PORT" -U postgres -d "$db" -f "$f" >"$DIR/$how-$name.tap" 2>&1
		secs=$SECONDS
		if out=$(check "$how" "$name" "$DIR/$how-$name.tap" 2>"$DIR/$how-$name.count"); then
			echo "ok pgtap/$how/$name ($(cat "$DIR/$how-$name.count"), $secs s)"
		else
			notok "pgtap/$how/$name ($(cat "$DIR/$how-$name.count"), $secs s)" "$out"
		fi
		q postgres postgres -c "DROP DATABASE $db" >/dev/null
	done
done
grep -E 'PANIC|server process .* was terminated' "$DIR/server.log" && notok "pgtap/server (a backend crashed: server.log above)"
exit "$failed"
