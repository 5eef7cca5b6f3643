#!/usr/bin/env bash
# The test command: bash test/run.sh
#
# On a fresh Debian bookworm machine, as root: installs the packages the
# suites need, builds the extension with warnings as errors, installs it,
# and runs every suite on throwaway servers as the postgres OS user:
#   regress    pg_regress over sql/ (expected/)
#   isolation  pg_isolation_regress over test/specs (test/expected)
#   pgtap      pg_prove over test/pgtap/*.sql, a fresh database per file
#   tap        prove over test/t/*.pl (PostgreSQL::Test::Cluster)
#   http       examples/http: the Node.js service over HTTP (node --test)
#   package    test/deb.sh: build the .deb with pg_buildext, install it, use it
# Each test file counts once.  Ends with one line "N passed, N failed" and
# exits non-zero when anything failed or nothing ran.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
. test/lib/common.sh

PASSED=0
FAILED=0
FAILURES=""

pass() { PASSED=$((PASSED + 1)); printf '  ok      %s\n' "$1"; }
fail() { FAILED=$((FAILED + 1)); FAILURES="$FAILURES $1"; printf '  FAILED  %s\n' "$1"; }

finish()
{
	echo
	[ -n "$FAILURES" ] && echo "failed:$FAILURES"
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ]
	exit $?
}

cleanup()
{
	[ -n "${WORK:-}" ] || return 0
	stop_server "$WORK/pgtap_data"
	stop_server "$WORK/http_data"
	# servers of an interrupted pg_regress / TAP run
	for pid in $(pgrep -u postgres -f "postgres -D $WORK" 2>/dev/null); do
		kill -QUIT "$pid" 2>/dev/null
	done
	[ "${KEEP_WORKDIR:-}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

install_packages || { fail "install packages"; finish; }
if ! build_and_install; then
	fail "build with $PG_CFLAGS_STRICT"
	finish
fi
make_workdir

# Count the "test NAME ... ok|FAILED" lines of a pg_regress-style run.
count_regress()
{
	local suite=$1 out=$2 n=0
	while read -r name result; do
		n=$((n + 1))
		if [ "$result" = ok ]; then pass "$suite/$name"; else fail "$suite/$name"; fi
	done < <(sed -nE 's/^(test |     )?([A-Za-z0-9_]+) +\.\.\. +(ok|FAILED|failed).*/\2 \3/p' "$out")
	[ "$n" -gt 0 ] || fail "$suite (did not run)"
}

make_var() { make -s --no-print-directory -f Makefile -f - <<<"print: ; @echo \$($1)" print 2>/dev/null; }

say "regress"
(cd "$WORK" && as_postgres "$PGXS_DIR/src/test/regress/pg_regress" \
	--bindir="$PG_BIN" --inputdir=. --temp-instance=./tmp_check \
	--temp-config=test/regress.conf $(make_var REGRESS)) >"$WORK/regress.log" 2>&1
count_regress regress "$WORK/regress.log"
[ -f "$WORK/regression.diffs" ] && cat "$WORK/regression.diffs"

say "isolation"
(cd "$WORK" && as_postgres "$PGXS_DIR/src/test/isolation/pg_isolation_regress" \
	--bindir="$PG_BIN" --inputdir=test --outputdir=test/output_iso \
	--temp-instance=./tmp_check_iso --temp-config=test/regress.conf \
	--load-extension=idempotency $(make_var ISOLATION)) >"$WORK/isolation.log" 2>&1
count_regress isolation "$WORK/isolation.log"
[ -f "$WORK/test/output_iso/regression.diffs" ] && cat "$WORK/test/output_iso/regression.diffs"

say "pgtap"
PGTAP_PORT=$(free_port 55432)
start_server "$WORK/pgtap_data" "$PGTAP_PORT"
n=0
for f in test/pgtap/*.sql; do
	[ -e "$f" ] || continue
	n=$((n + 1))
	db="tap_$n"
	as_postgres psql -X -q -h "$WORK" -p "$PGTAP_PORT" -d postgres -c "CREATE DATABASE $db" &&
		as_postgres psql -X -q -h "$WORK" -p "$PGTAP_PORT" -d "$db" \
			-c "CREATE EXTENSION pgtap" -c "CREATE EXTENSION idempotency" >/dev/null
	if (cd "$WORK" && as_postgres pg_prove -h "$WORK" -p "$PGTAP_PORT" -d "$db" "$f") >"$WORK/pgtap_$n.log" 2>&1; then
		pass "pgtap/$(basename "$f")"
	else
		fail "pgtap/$(basename "$f")"
		cat "$WORK/pgtap_$n.log"
	fi
done
[ "$n" -gt 0 ] || fail "pgtap (no tests)"
stop_server "$WORK/pgtap_data"

say "tap"
n=0
for f in test/t/*.pl; do
	[ -e "$f" ] || continue
	n=$((n + 1))
	name=$(basename "$f" .pl)
	as_postgres mkdir -p "$WORK/tap_$name"
	if (cd "$WORK" && as_postgres env TESTDIR="$WORK/tap_$name" \
		PG_REGRESS="$PGXS_DIR/src/test/regress/pg_regress" \
		prove -I "$PGXS_DIR/src/test/perl" -I "$WORK/test/t" "$f") >"$WORK/tap_$name.log" 2>&1; then
		pass "tap/$name"
	else
		fail "tap/$name"
		cat "$WORK/tap_$name.log"
		for log in "$WORK/tap_$name"/tmp_check/log/*; do
			[ -f "$log" ] || continue
			echo "--- $log (last 40 lines)"
			tail -n 40 "$log"
		done
	fi
done
[ "$n" -gt 0 ] || fail "tap (no tests)"

say "http"
# examples/http: the Node.js payments service, driven over HTTP by node --test
command -v node >/dev/null && command -v npm >/dev/null ||
	apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
HTTP_PORT=$(free_port 55532)
start_server "$WORK/http_data" "$HTTP_PORT"
as_postgres psql -X -q -h "$WORK" -p "$HTTP_PORT" -d postgres -c "CREATE DATABASE http"
if (cd "$WORK/examples/http" && npm ci --no-audit --no-fund >"$WORK/npm.log" 2>&1 &&
	PGHOST=127.0.0.1 PGPORT="$HTTP_PORT" PGUSER=postgres PGDATABASE=http \
	node --test test/) >"$WORK/http.log" 2>&1; then
	pass "http/examples/http (node --test: $(grep -c '^ok ' "$WORK/http.log") cases)"
else
	fail "http/examples/http"
	cat "$WORK/npm.log" "$WORK/http.log"
fi
stop_server "$WORK/http_data"

say "package"
if bash test/deb.sh >"$WORK/package.log" 2>&1; then
	pass "package/postgresql-$PG_MAJOR-idempotency (dpkg-buildpackage, dpkg -i, use)"
else
	fail "package/postgresql-$PG_MAJOR-idempotency"
	cat "$WORK/package.log"
fi

finish
