#!/usr/bin/env bash
# test/edition/regress.sh PG_BIN DIR PORT [plain|tle]: the C build's
# regress files (sql/, pg_regress) and isolation specs (test/specs/,
# pg_isolation_regress) against the SQL edition, on a throwaway server run
# from PG_BIN (data and socket in DIR, port PORT) with the default
# configuration: no preload.  Installed as the plain script (plain, the
# default), or (tle) through pg_tle: the server preloads pg_tle, and each
# database that installs the edition gets CREATE EXTENSION pg_tle, the
# pg_tle install script (pgtle.install_extension) and CREATE EXTENSION
# idempotency, as on RDS; its lines then say tle/regress/NAME and
# tle/isolation/NAME.
# PG_BIN should have no C build installed (test/edition/prepare.sh makes
# such a copy), so that nothing here can run it by mistake.  As the postgres
# OS user, after make edition.  Prints "ok regress/NAME" or "not ok
# regress/NAME" per file (isolation/NAME for the specs), then the diffs as
# "# " lines after "# regression.diffs of regress:" (or iso:); exits
# non-zero when one failed.
#
# What runs differs from the C build's run in these ways only:
#   - setup: test/edition/setup.sql installs the plain script (or the
#     pg_tle edition, whose setup output counts one extension)
#     (edition/dist/idempotency-sql--VERSION.sql) into the test database's
#     public schema instead of CREATE EXTENSION idempotency; its expected
#     output is test/edition/expected/setup.out.  The isolation database is
#     made, with the plain script installed, before pg_isolation_regress
#     runs (--use-existing) instead of --load-extension=idempotency.
#   - every input starts with \set SHOW_CONTEXT never, and a
#     \set SHOW_CONTEXT in it says never too: PL/pgSQL adds a CONTEXT line
#     to each error it raises.  The expected output is the C build's with
#     the same lines and its own CONTEXT lines removed.
#   - CREATE EXTENSION idempotency inside a test (a database of its own)
#     becomes \ir edition-install.psql, the plain script run quietly, in
#     the input and in the expected output alike.
#   - test/edition/expected/NAME.out (regress) and
#     test/edition/expected/iso/NAME.out (isolation), where one exists,
#     replaces the expected output: only where docs/ documents a
#     difference between the editions.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_BIN=${1:?usage: test/edition/regress.sh PG_BIN DIR PORT [plain|tle]}
DIR=${2:?usage: test/edition/regress.sh PG_BIN DIR PORT [plain|tle]}
PORT=${3:?usage: test/edition/regress.sh PG_BIN DIR PORT [plain|tle]}
MODE=${4:-plain}
export PATH="$PG_BIN:$PATH"
PGXS_DIR=$(dirname "$(pg_config --pgxs)")/../..
version=$(sed -nE "s/^default_version = '([^']+)'/\1/p" "$root/idempotency.control")
PLAIN=$root/edition/dist/idempotency-sql--$version.sql
TLE=$root/edition/dist/idempotency-pgtle--$version.sql
case $MODE in
plain) PREFIX="" PRELOAD="" ;;
tle) PREFIX="tle/" PRELOAD=pg_tle ;;
*) echo "usage: test/edition/regress.sh PG_BIN DIR PORT [plain|tle]" >&2; exit 2 ;;
esac

# The files that run against the edition, in the Makefile's order
REGRESS="setup claim attempts batch record hash input expire expire_backlog execute execute_hostile
key_locks owner interval_calendar execute_rules response_dump_size key_lock_secret plans large_response await string_settings execute_cache claim_replay
row_security_recorded"
ISOLATION="claim_commit batch_order claim_rollback claim_nowait claim_vs_complete await
claim_repeatable_read claim_serializable takeover execute execute_race scope_probe
key_lock_savepoints scope_policy_before_lock lease_after_wait restamp_hidden row_type_change"
# and those that do not, each with its reason
declare -A EXCLUDED=(
	[regress/guc]="the C library's settings as pg_settings lists them (bounds, contexts, units): the edition's are placeholder settings, read with their defaults"
	[regress/stats]="the counters the preloaded library keeps in shared memory: the edition keeps none"
	[regress/no_preload]="how the C library answers when it is loaded at first use rather than preloaded"
	[regress/default_privileges]="CREATE EXTENSION of the C build in a database of its own; the edition's installs are checked the same way by test/edition/install.sh (default-privileges-revoked)"
	[isolation/guard_index]="the preloaded library's guard (a ProcessUtility hook): the edition has no hook"
	[isolation/guard_matview]="the preloaded library's guard (a ProcessUtility hook): the edition has no hook"
	[isolation/guard_sequence]="the preloaded library's guard (a ProcessUtility hook): the edition has no hook"
	[isolation/guard_mapping_table]="the preloaded library's guard (a ProcessUtility hook): the edition has no hook"
	[isolation/scope_policy_cache]="the C build's per-session memory of allowed scopes (src/policy.c): the edition probes the policy at each key lock (idem__key_lock_id)"
	[isolation/key_lock_squat]="the edition's key locks are advisory locks, which a role that reads a lock id in pg_locks can take (docs/managed.md, What differs)"
)
# and the edition's own tests (test/edition/sql/NAME.sql, expected/NAME.out),
# run as they are, after setup
EDITION_ONLY=$(cd "$root/test/edition/sql" 2>/dev/null && ls -- *.sql 2>/dev/null | sed 's/\.sql$//' | tr '\n' ' ')
failed=0
# shellcheck source=test/edition/lib.sh
. "$root/test/edition/lib.sh"

# Every file of the Makefile's REGRESS and ISOLATION runs here or is
# excluded above, and nothing else: a new test is not left out unseen.
listed=$(for t in $REGRESS no_preload; do echo "regress/$t"; done; for t in $ISOLATION; do echo "isolation/$t"; done)
mk=$(make -s -C "$root" --no-print-directory PG_CONFIG="$PG_BIN/pg_config" -f Makefile -f - print-REGRESS print-ISOLATION \
	<<<'print-%: ; @echo $($*)')
# shellcheck disable=SC2046 # make prints names without spaces
makefile_lists=$( (set -- $(sed -n 1p <<<"$mk"); for t; do echo "regress/$t"; done; echo regress/no_preload
	set -- $(sed -n 2p <<<"$mk"); for t; do echo "isolation/$t"; done) | sort -u)
ours=$( (printf '%s\n' "$listed"; printf '%s\n' "${!EXCLUDED[@]}") | sort -u)
if [ "$makefile_lists" != "$ours" ]; then
	notok "lists (test/edition/regress.sh's lists and the Makefile's REGRESS/ISOLATION differ)" \
		"$(diff <(printf '%s\n' "$makefile_lists") <(printf '%s\n' "$ours"))"
fi
# (said once, by the plain install's run)
[ "$MODE" = plain ] && for t in "${!EXCLUDED[@]}"; do echo "# not run on the edition: $t (${EXCLUDED[$t]})"; done | sort

[ -f "$PLAIN" ] && [ -f "$TLE" ] || { notok "${PREFIX}edition (no $PLAIN: make edition first)"; exit 1; }
if [ -e "$(pg_config --sharedir)/extension/idempotency.control" ]; then
	notok "server (the C build is installed in $PG_BIN's PostgreSQL: use test/edition/prepare.sh's copy)"
	exit 1
fi

# --- the inputs and expected outputs --------------------------------------
rm -rf "$DIR/regress" "$DIR/iso"
mkdir -p "$DIR/regress/sql" "$DIR/regress/expected" "$DIR/iso/specs" "$DIR/iso/expected"
if [ "$MODE" = tle ]; then
	install="CREATE EXTENSION IF NOT EXISTS pg_tle;
\\i $TLE
CREATE EXTENSION idempotency;"
else
	install="\\i $PLAIN"
fi
cat >"$DIR/regress/sql/edition-install.psql" <<EOF
\\set ECHO none
\\o /dev/null
$install
\\o
\\set ECHO all
EOF
# \ir resolves it from the input's directory, or from the current one when
# psql reads the input from stdin (as pg_regress 15's does)
cp "$DIR/regress/sql/edition-install.psql" "$DIR/regress/"
# the input's own transformation; for the expected output, the same plus
# the echo of edition-install.psql's first line and no CONTEXT lines
# (and the key lock tag: the edition's key locks are int8 advisory locks,
# objsubid 1, where the C build's are 7653; sql/key_locks.sql counts them);
# and a SET of idempotency.await_result, which the C build checks at SET, is
# a SET LOCAL and a claim that reads it (the edition's placeholder takes any
# value, the call refuses it: test/edition/sql/setting_values.sql)
ed_input() {
	sed -e 's/^\\set SHOW_CONTEXT .*/\\set SHOW_CONTEXT never/' \
		-e 's/^CREATE EXTENSION idempotency;$/\\ir edition-install.psql/' \
		-e "s/locktype = 'advisory' AND objsubid = 7653/locktype = 'advisory' AND objsubid = 1/" \
		-e "s/^SET idempotency\.await_result = '*\(-1\|2h\)'*;$/DO \$\$ BEGIN PERFORM set_config('idempotency.await_result', '\1', true); PERFORM idem_claim('a-bad', NULL, 'await'); END \$\$;/" "$1"
}
ed_expected() {
	echo '\set SHOW_CONTEXT never'
	ed_input "$1" | sed -e '/^CONTEXT:  /d' -e 's/^\\ir edition-install.psql$/&\n\\set ECHO none/'
}
for t in $REGRESS; do
	if [ "$t" = setup ]; then
		cp "$root/test/edition/setup.sql" "$DIR/regress/sql/setup.sql"
		# the pg_tle edition is an extension: one in pg_extension
		if [ "$MODE" = tle ]; then
			sed 's/^ t         |          0$/ t         |          1/' "$root/test/edition/expected/setup.out"
		else
			cat "$root/test/edition/expected/setup.out"
		fi >"$DIR/regress/expected/setup.out"
		continue
	fi
	{ echo '\set SHOW_CONTEXT never'; ed_input "$root/sql/$t.sql"; } >"$DIR/regress/sql/$t.sql"
	if [ -f "$root/test/edition/expected/$t.out" ]; then
		cp "$root/test/edition/expected/$t.out" "$root"/test/edition/expected/"$t"_[0-9].out "$DIR/regress/expected/" 2>/dev/null
	else
		for e in "$root/expected/$t.out" "$root"/expected/"$t"_[0-9].out; do
			[ -f "$e" ] && ed_expected "$e" >"$DIR/regress/expected/$(basename "$e")"
		done
	fi
done
for t in $EDITION_ONLY; do
	cp "$root/test/edition/sql/$t.sql" "$DIR/regress/sql/"
	cp "$root/test/edition/expected/$t.out" "$root"/test/edition/expected/"$t"_[0-9].out "$DIR/regress/expected/" 2>/dev/null
done
for t in $ISOLATION; do
	cp "$root/test/specs/$t.spec" "$DIR/iso/specs/"
	if [ -f "$root/test/edition/expected/iso/$t.out" ]; then
		cp "$root/test/edition/expected/iso/$t.out" "$root"/test/edition/expected/iso/"$t"_[0-9].out "$DIR/iso/expected/" 2>/dev/null
	else
		for e in "$root/test/expected/$t.out" "$root"/test/expected/"$t"_[0-9].out; do
			[ -f "$e" ] && sed '/^CONTEXT:  /d' "$e" >"$DIR/iso/expected/$(basename "$e")"
		done
	fi
done

# --- the server ------------------------------------------------------------
DATA=$DIR/data
edition_server "${PREFIX}server" "listen_addresses = ''" "shared_preload_libraries = '$PRELOAD'"

# pg_regress's and pg_isolation_regress's "test NAME ... ok|FAILED" (15)
# or TAP lines (16 on) as this script's
# and each test named after the log that it did not report (pg_regress stops
# at a test that has no expected output, say: those after it never ran)
report() {
	local suite=$1 log=$2 n=0 name result seen=" "
	shift 2
	while read -r name result; do
		n=$((n + 1))
		seen="$seen$name "
		if [ "$result" = ok ]; then echo "ok $PREFIX$suite/$name"; else notok "$PREFIX$suite/$name"; fi
	done < <(sed -nE -e 's/^(test +| +)?([A-Za-z0-9_-]+) +\.\.\. +(ok|FAILED|failed)\b.*/\2 \3/p' \
		-e 's/^ok +[0-9]+ +[-+] +([A-Za-z0-9_-]+) .*/\1 ok/p' \
		-e 's/^not ok +[0-9]+ +[-+] +([A-Za-z0-9_-]+) .*/\1 FAILED/p' "$log")
	[ "$n" -gt 0 ] || notok "$PREFIX$suite (did not run)" "$(tail -n 30 "$log")"
	for name; do
		case $seen in *" $name "*) ;; *) notok "$PREFIX$suite/$name (did not run)" "$(tail -n 5 "$log")" ;; esac
	done
}

# shellcheck disable=SC2086
(cd "$DIR/regress" && "$PGXS_DIR/src/test/regress/pg_regress" --bindir="$PG_BIN" --host="$DIR" --port="$PORT" \
	--user=postgres --inputdir=. --outputdir=. --dbname=contrib_regression $REGRESS $EDITION_ONLY) >"$DIR/regress.log" 2>&1
# shellcheck disable=SC2086
report regress "$DIR/regress.log" $REGRESS $EDITION_ONLY

# the isolation database, with the edition installed, made here
if out=$(psql -X -q -h "$DIR" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 \
	-c "CREATE DATABASE isolation_regression" 2>&1) &&
	out=$(psql -X -q -h "$DIR" -p "$PORT" -U postgres -d isolation_regression -v ON_ERROR_STOP=1 \
		-f "$DIR/regress/sql/edition-install.psql" 2>&1); then
	# shellcheck disable=SC2086
	(cd "$DIR/iso" && "$PGXS_DIR/src/test/isolation/pg_isolation_regress" --bindir="$PG_BIN" --host="$DIR" \
		--port="$PORT" --user=postgres --inputdir=. --outputdir=. --use-existing \
		--dbname=isolation_regression $ISOLATION) >"$DIR/isolation.log" 2>&1
	# shellcheck disable=SC2086
	report isolation "$DIR/isolation.log" $ISOLATION
else
	notok "${PREFIX}isolation (the edition in the isolation database)" "$out"
fi

# key locks taken by a suspended portal of the extended protocol, resumed
# across savepoints rolled back (test/portal_locks.pl, as tap/018_portal_locks
# runs it against the C build), as a tenant under row level security
if out=$(psql -X -q -h "$DIR" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 \
	-c "CREATE DATABASE portal_locks" 2>&1) &&
	out=$(psql -X -q -h "$DIR" -p "$PORT" -U postgres -d portal_locks -v ON_ERROR_STOP=1 \
		-f "$DIR/regress/sql/edition-install.psql" \
		-c "CREATE ROLE edition_portal_tenant LOGIN IN ROLE idempotency_app" \
		-c "ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY" \
		-c "CREATE POLICY tenant_scope ON idempotency_keys TO idempotency_app
		    USING (scope = current_user) WITH CHECK (scope = current_user)" \
		-c "SELECT idem_save_row_security()" 2>&1); then
	out=$(perl "$root/test/portal_locks.pl" "$DIR" "$PORT" edition_portal_tenant portal_locks 1 2>&1)
	grep -Eq '^(not )?ok portal_locks/cap($|:)' <<<"$out" || notok "${PREFIX}portal_locks (test/portal_locks.pl did not finish)" "$out"
	while IFS= read -r line; do
		case $line in
		"ok "*) echo "ok $PREFIX${line#ok }" ;;
		"not ok "*) notok "$PREFIX${line#not ok }" ;;
		esac
	done <<<"$out"
	psql -X -q -h "$DIR" -p "$PORT" -U postgres -d postgres -c "DROP DATABASE portal_locks" \
		-c "DROP ROLE edition_portal_tenant" >/dev/null 2>&1
else
	notok "${PREFIX}portal_locks (the edition, a tenant and its policy in database portal_locks)" "$out"
fi

for d in "$DIR/regress/regression.diffs" "$DIR/iso/regression.diffs"; do
	[ -s "$d" ] || continue
	echo "# regression.diffs of ${PREFIX}$(basename "$(dirname "$d")"):"
	sed 's/^/# /' "$d"
done
grep -E 'PANIC|server process .* was terminated' "$DIR/server.log" && notok "${PREFIX}server (a backend crashed: server.log above)"
exit "$failed"
