#!/usr/bin/env bash
# The test command: bash test/run.sh
#
# On a fresh Debian bookworm machine, as root (re-runs are fine), for each
# PostgreSQL version the extension supports: installs the Debian packages
# the suites need (apt-get update only when one is missing), builds the
# extension with -Wall -Wextra -Werror (make WERROR=1), installs it, copies
# the tree to a temporary directory the postgres OS user owns, and runs the
# suites there on throwaway servers as that user: regress, isolation and tap
# through make installcheck and make prove_installcheck, pgtap with pg_prove,
# the slow ones through their make targets (make check-valgrind,
# check-citus, check-examples, check-package, check-bench, check-monitoring:
# test/suite.sh);
# the suites themselves are in test/lib/suites.sh.
#   15  on this machine (Debian bookworm's postgresql-15): every suite
#   17  in a Debian trixie chroot: regress isolation pgtap tap docs edition
#       rust package bench monitoring
#   18  in a Debian forky chroot: the same, and citus
#   19  in a Debian forky chroot with experimental's postgresql-19:
#       regress isolation pgtap tap docs edition package bench monitoring (pgtap built
#       from the tarball of Debian's pgtap source while Debian ships no
#       postgresql-19-pgtap)
# test/lib/chroot.sh makes each chroot with debootstrap --variant=minbase
# from the mirror of this machine's apt sources (the base system cached as
# /var/cache/idempotency-chroot-SUITE.tar, its downloaded packages under
# /var/cache/idempotency-apt-*), copies the tree and ../shared in and runs
# this script there with PG_MAJOR set; each chroot is removed afterwards.
# The chroots are made, their packages installed and the extension (Citus,
# the Rust crates) built ahead, at the lowest priority, while 15 runs here
# (prepare_chroots); each chroot's version runs as soon as its chroot is
# ready, one at a time beside 15 and two at a time once 15 has ended (the
# runner, start_runner), its output
# shown when its turn comes, in version order.
# A version whose Debian packages cannot be fetched is reported and counted
# as skipped, never as passed.
#   PG_MAJOR=18 bash test/run.sh        one version (PG_MAJOR="17 18": some)
#   bash test/run.sh tap pgtap          only the suites named, on every version
#   IDEM_CITUS_VERSIONS="15 17 18"      the citus suite on those versions too
#                                       (default: 15 and 18; 17 and 18 use
#                                       Citus 14.0.1, see docs/citus.md)
# The suites:
#   regress    make installcheck TEMP_INSTANCE=1: pg_regress over sql/
#              (expected/, with expected/*_1.out where a version prints
#              differently) on a private server
#   isolation  the same for pg_isolation_regress over test/specs
#   pgtap      pg_prove over test/pgtap/*.sql, a fresh database per file
#   tap        make prove_installcheck: prove -j2 over test/t/*.pl
#              (PostgreSQL::Test::Cluster), two files at a time; in a
#              chroot, 060_major_upgrade.pl upgrades from this system's
#              PostgreSQL 15 (skipped, and counted so, without one)
#   docs       test/docs.sh: every sql block of README.md and docs/*.md in
#              document order, a fresh database per document, output
#              compared with the text block that follows; on a server with
#              the preload and on one without (one line per document each)
#   edition    the SQL edition (make edition): test/edition/install.sh (pg_tle
#              as on RDS, the plain script as on Cloud SQL/Azure/Neon, pg_cron
#              expiry; pg_tle built by ../shared/pg_tle/build.sh into a private
#              copy of the PostgreSQL without the C build, pg_cron from
#              postgresql-N-cron where Debian has it), test/edition/regress.sh
#              (sql/ and test/specs/ against the edition) and
#              test/edition/hash_corpus.sql (the C build's request hash
#              against the edition's, in one database)
#   http       examples/: the Node.js (examples/http), Go (examples/go) and
#              Java (examples/java) payment services, each against the
#              conformance suite examples/conformance (node --test), and
#              the libraries they use: clients/node (node --test, its
#              types compiled by tsc --strict, its npm pack tarball in a
#              fresh app), clients/go (go test),
#              clients/java (the jar, JUnit); the three at once
#   rust       test/rust.sh: the Rust crate clients/rust (pg-idempotency)
#              and the Axum service examples/rust, built offline from
#              Debian's packaged crates; cargo test against a server, the
#              service against examples/conformance (on trixie and later)
#   package    test/deb.sh: build the version's .deb (and the 3.0 (quilt)
#              source package) with pg_buildext, install it, use it; with
#              on 17 (IDEM_AUTOPKGTEST=1 on another; =0 leaves it out) also
#              its autopkgtest, debian/tests/
#   bench      bench/run.sh --check: the benchmark's contention mode, short,
#              checking exactly-once for every variant (no timing asserted)
#   monitoring Debian's prometheus-postgres-exporter with monitoring/queries.yaml
#              against a server with two databases and traffic: the scraped
#              counters of each, exact, and every metric
#              monitoring/grafana-dashboard.json references
#   valgrind   pg_regress and the isolation specs that only concurrency
#              reaches (VALGRIND_ISOLATION, test/lib/suites.sh) again,
#              against one server run under valgrind's memcheck (every
#              backend and the worker)
#   citus      test/citus/checks.sh: a Citus cluster on loopback (1
#              coordinator + 2 workers, test/citus/cluster.sh) with the
#              README's scale-out recipe: every outcome through the
#              coordinator, on the worker, delegated and mixed; fencing and
#              exactly-once under pgbench; one-phase commit; wait => false;
#              expiry on every worker; the tenant recipe.  Citus (13.2.2 for
#              15, 14.0.1 for 17 and 18) is built by ../shared/citus/build.sh
#              when missing; without either the suite is skipped (counted as
#              skipped, never as passed)
# Every test file counts once per version (a .sql, a .spec, a .pl, a service
# x conformance file, the package) and prints one line naming its version
# ("ok      pg18/regress/claim"); failures print their diffs or log tails.
# Each version's own closing line is shown as "pgN summary: ...", and a line
# "versions run: ..." gives each version's counts.  Ends with exactly one
# line "N passed, N failed" (", N skipped" when something was skipped) and
# exits non-zero when anything failed, a suite could not run, or nothing
# ran.  Every server it started is stopped on the way out, also after a
# failure or an interrupt, and every chroot removed.
#   KEEP_WORKDIR=1 bash test/run.sh keeps the temporary directory (of a
#   version run on this machine)
set -uo pipefail # not -e: a failing suite is counted and the run goes on
cd "$(dirname "$0")/.." || exit 2
VERSIONS_GIVEN=${PG_MAJOR:-}
PG_BIN_GIVEN=${PG_BIN:-}
# PG_BIN names one server: its version alone, unless PG_MAJOR says otherwise
if [ -n "$PG_BIN_GIVEN" ] && [ -z "$VERSIONS_GIVEN" ] && [ -x "$PG_BIN_GIVEN/pg_config" ]; then
	VERSIONS_GIVEN=$("$PG_BIN_GIVEN/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
	export PG_MAJOR=$VERSIONS_GIVEN
fi
. test/lib/common.sh
. test/lib/chroot.sh
. test/lib/suites.sh

PASSED=0
FAILED=0
SKIPPED=0
FAILURES=""
CHILD=""
WORK=""
RUNDIR=""
CHROOT_ROOT=""


finish()
{
	echo
	[ -n "$DIGEST" ] && printf '%s\n' "$DIGEST"
	[ -n "$VERSION_SUMMARY" ] && echo "versions run: $VERSION_SUMMARY"
	[ -n "$FAILURES" ] && echo "failed:$FAILURES"
	if [ "$SKIPPED" -gt 0 ]; then
		echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
	else
		echo "$PASSED passed, $FAILED failed"
	fi
	[ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ]
	exit $?
}

cleanup()
{
	# the suite that was running when we were interrupted, with its children
	[ -n "$CHILD" ] && kill -TERM -- "-$CHILD" 2>/dev/null
	# a version's run (here or in its chroot) stops its own servers on
	# SIGTERM, as a suite does: give it the time before anything is killed
	for _ in $(seq 100); do
		[ -n "$CHILD" ] && kill -0 -- "-$CHILD" 2>/dev/null || break
		sleep 0.2
	done
	remove_workdir
	# then end whatever still runs in the chroot
	[ -n "$CHROOT_ROOT" ] && chroot_remove "$CHROOT_ROOT"
	[ -n "$CHILD" ] && kill -KILL -- "-$CHILD" 2>/dev/null
	stop_runner
	stop_preparing
	if [ -n "$CITUS_BUILD_PID" ]; then
		kill -TERM -- "-$CITUS_BUILD_PID" 2>/dev/null
		wait "$CITUS_BUILD_PID" 2>/dev/null
	fi
	[ -n "$CITUS_BUILD_LOG" ] && rm -f "$CITUS_BUILD_LOG"
	[ -n "$RUNDIR" ] && rm -rf "$RUNDIR"
	CHILD=""
	WORK=""
	CHROOT_ROOT=""
	RUNDIR=""
	CITUS_BUILD_PID=""
	CITUS_BUILD_LOG=""
}

# Interrupted: stop everything, then count the interruption as a failure.
interrupted()
{
	trap - INT TERM
	echo
	cleanup
	fail "run (interrupted by SIG$1)"
	finish
}
trap cleanup EXIT
trap 'interrupted INT' INT
trap 'interrupted TERM' TERM

ALL_SUITES="regress isolation pgtap tap docs edition http rust package bench monitoring valgrind citus"
# The versions, and the suites each runs by default (test/lib/chroot.sh
# says where each comes from).  Every SQL-level suite and bench's
# exactly-once check on every version; valgrind on 15 (on 18 by name,
# PG_MAJOR=18 bash test/run.sh valgrind: left out for time); http on 15
# only; rust on 17 (trixie: Debian's first release with the crates); citus on 15 (Citus 13.2.2) and 18 (Citus 14.0.1), and on 17 too
# with IDEM_CITUS_VERSIONS="15 17 18" or by name (PG_MAJOR=17 bash
# test/run.sh citus).
ALL_VERSIONS="15 17 18 19"
IDEM_CITUS_VERSIONS=${IDEM_CITUS_VERSIONS:-15 18}
default_suites()
{
	local s
	case $1 in
	15) s="regress isolation pgtap tap docs edition http package bench monitoring valgrind" ;;
	17) s="regress isolation pgtap tap docs edition rust package bench monitoring" ;;
	*) s="regress isolation pgtap tap docs edition package bench monitoring" ;;
	esac
	case " $IDEM_CITUS_VERSIONS " in *" $1 "*) s="$s citus" ;; esac
	echo "$s"
}

for s in "$@"; do
	case " $ALL_SUITES " in
	*" $s "*) ;;
	*) echo "unknown suite '$s'; the suites: $ALL_SUITES" >&2; exit 2 ;;
	esac
done
VERSIONS=${VERSIONS_GIVEN:-$ALL_VERSIONS}
for v in $VERSIONS; do
	case " $ALL_VERSIONS " in
	*" $v "*) ;;
	*) echo "PostgreSQL $v is not tested here; the versions: $ALL_VERSIONS" >&2; exit 2 ;;
	esac
done

# True when version $1 runs on this system itself rather than in a chroot:
# inside the chroot made for it, with PG_BIN given, or when this system is
# the Debian release that version comes from (15: bookworm).
runs_here()
{
	[ "${IDEM_IN_CHROOT:-}" = 1 ] || [ -n "$PG_BIN_GIVEN" ] ||
		[ "$(host_codename)" = "$(chroot_suite "$1")" ]
}

# --- one version, on this system ------------------------------------------
# Debian ships no postgresql-NN-pgtap for this version (19, while it is in
# experimental): build pgTAP from the upstream tarball of Debian's pgtap
# source package (its .orig.tar, checked against the SHA-256 the suite's
# Sources index gives; the chroot's apt sources have deb-src for this, see
# test/lib/chroot.sh), as PGXS builds any extension, into PG_BIN's
# PostgreSQL.  Returns 2 when the source cannot be fetched (the pgtap suite
# is then skipped), 1 when it does not build.
pgtap_from_source()
{
	local dir mirror path sha file rc=0
	say "building pgtap for PostgreSQL $PG_MAJOR from Debian's pgtap source"
	mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null)
	read -r path sha file < <(apt-cache showsrc pgtap 2>/dev/null | awk '
		/^$/ { if (f != "") exit }
		/^Directory:/ { d = $2 }
		/^Checksums-Sha256:/ { s = 1; next }
		/^[^ ]/ { s = 0 }
		s && $3 ~ /\.orig\.tar\./ { h = $1; f = $3 }
		END { print d, h, f }')
	if [ -z "$mirror" ] || [ -z "$file" ]; then
		echo "no pgtap source package in the apt sources" >&2
		return 2
	fi
	dir=$(mktemp -d /tmp/idempotency-pgtap.XXXXXX)
	if ! /usr/lib/apt/apt-helper download-file "$mirror/$path/$file" "$dir/$file" "SHA256:$sha" >"$dir/fetch.log" 2>&1; then
		cat "$dir/fetch.log"
		rm -rf "$dir"
		return 2
	fi
	tar -C "$dir" -xf "$dir/$file" &&
		make -s -C "$dir"/pgtap-*/ PG_CONFIG="$PG_BIN/pg_config" >"$dir/build.log" 2>&1 &&
		make -s -C "$dir"/pgtap-*/ PG_CONFIG="$PG_BIN/pg_config" install >>"$dir/build.log" 2>&1 ||
		{ rc=1; cat "$dir/build.log"; }
	rm -rf "$dir"
	return $rc
}

run_one_version()
{
	local suites=$1 log
	echo "idempotency test run: PostgreSQL $PG_MAJOR ($(host_codename)), $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, suites: $suites"
	START=$SECONDS
	VERSION_SUMMARY="pg$PG_MAJOR on $(host_codename)"
	PGTAP_MISSING=""
	log=$(mktemp /tmp/idempotency-install.XXXXXX)
	# shellcheck disable=SC2086
	if ! install_packages $(suite_packages $suites) >"$log" 2>&1; then
		cat "$log"
		if fetch_failed "$log"; then
			skip "packages (PostgreSQL $PG_MAJOR's Debian packages could not be fetched: not tested)"
		else
			fail "install packages"
		fi
		rm -f "$log"
		finish
	fi
	rm -f "$log"
	# pgtap for suite pgtap and for the edition's (test/edition/pgtap.sh)
	case " $suites " in
	*" pgtap "* | *" edition "*)
		if ! dpkg-query -W -f='${Status}' "postgresql-$PG_MAJOR-pgtap" 2>/dev/null | grep -q "install ok installed"; then
			if apt_offers "postgresql-$PG_MAJOR-pgtap"; then
				apt_install "postgresql-$PG_MAJOR-pgtap" || { fail "install postgresql-$PG_MAJOR-pgtap"; finish; }
			else
				pgtap_from_source
				case $? in
				0) ;;
				2) PGTAP_MISSING=1 ;;
				*) fail "build pgtap from Debian's source package"; finish ;;
				esac
			fi
		fi
		;;
	esac
	# pg_cron for the edition suite, where Debian has it for this version
	# (not for 19 yet: the suite then reports its check skipped)
	case " $suites " in
	*" edition "*)
		if ! dpkg-query -W -f='${Status}' "postgresql-$PG_MAJOR-cron" 2>/dev/null | grep -q "install ok installed" &&
			apt_offers "postgresql-$PG_MAJOR-cron"; then
			apt_install "postgresql-$PG_MAJOR-cron" || { fail "install postgresql-$PG_MAJOR-cron"; finish; }
		fi
		;;
	esac
	if [ "${IDEM_PREPARED:-}" = 1 ]; then
		say "build and install (PostgreSQL $PG_MAJOR, -Wall -Wextra -Werror): done ahead, with its chroot"
	else
		build_and_install || { fail "build"; finish; }
	fi
	# the chroots' runs copy this installation for their major upgrade test
	[ -n "${IDEM_BUILT_MARK:-}" ] && : >"$IDEM_BUILT_MARK"
	[ "${IDEM_PREPARE_ONLY:-}" = 1 ] || start_citus_build "$suites"
	if [ "${IDEM_PREPARE_ONLY:-}" = 1 ]; then
		# a chroot made ahead (run_all_versions): Citus built too when the
		# citus suite will need it, then nothing run
		case " $suites " in
		*" citus "*)
			if [ ! -f "$("$PG_BIN/pg_config" --pkglibdir)/citus.so" ] && [ -f ../shared/citus/build.sh ]; then
				env PG_CONFIG="$PG_BIN/pg_config" "${CITUS_BUILD_ENV[@]}" bash ../shared/citus/build.sh || exit 1
			fi
			;;
		esac
		case " $suites " in
		*" rust "*) IDEM_RUST_BUILD_ONLY=1 bash test/rust.sh "$PG_BIN" "$RUST_WORK" || exit 1 ;;
		esac
		echo "prepared in $((SECONDS - START)) s"
		exit 0
	fi
	make_workdir
	# make in the work directory as the postgres user: the Makefile's test targets
	MAKE_PG=(runuser -u postgres -- env TMPDIR="$WORK/tmp" make -C "$WORK" --no-print-directory
		PG_CONFIG="$PG_BIN/pg_config")
	export IDEM_TMP=$WORK # test/deb.sh puts its files under ours
	# test/t/060_major_upgrade.pl: the older PostgreSQL run_in_chroot put here
	if [ -d /opt/idempotency-old/usr/lib/postgresql/$OLD_MAJOR ] && [ "$PG_MAJOR" != "$OLD_MAJOR" ]; then
		export IDEM_OLD_INSTALL=/opt/idempotency-old/usr/lib/postgresql/$OLD_MAJOR
		IDEM_OLD_LIBRARY_PATH=$(chroot_old_libraries "$OLD_MAJOR")
		export IDEM_OLD_LIBRARY_PATH
	fi
	local t0
	for s in $suites; do
		t0=$SECONDS
		case $s in
		citus) wait_citus_build && run_target "$s" ;;
		valgrind | http | package | bench | monitoring) run_target "$s" ;;
		rust) run_rust ;;
		*) "suite_$s" ;;
		esac
		note "$s: $((SECONDS - t0)) s"
	done
	echo
	echo "took $((SECONDS - START)) s"
	finish
}

# A slow suite through its make target (make check-valgrind, ... as
# test/suite.sh runs it, against the server just installed), its lines
# shown and counted into this run's.
run_target()
{
	local s=$1 target=check-$1 log rc
	[ "$s" = http ] && target=check-examples
	log=$(mktemp /tmp/idempotency-target.XXXXXX)
	run_logged "$log" make --no-print-directory PG_CONFIG="$PG_BIN/pg_config" "$target"
	rc=$?
	grep -v '^suite [a-z]*: ' "$log"
	count_lines "$log"
	[ "$rc" -ne 0 ] && [ "$COUNTED_FAILED" -eq 0 ] && fail "$s (make $target exited $rc)"
	rm -f "$log"
}

# The Rust crate and service (test/rust.sh, which installs what it needs),
# built in a directory of its own that outlives the run's work directory:
# the build made ahead (prepare_chroots) is the one tested, and a re-run on
# a machine of its own builds only what changed.
RUST_WORK=/var/tmp/idempotency-rust-$PG_MAJOR
run_rust()
{
	local log rc
	say "rust (test/rust.sh: the pg-idempotency crate's cargo test against a server, examples/rust against examples/conformance)"
	if [ "$(host_codename)" = bookworm ]; then
		skip "rust (Debian bookworm packages no Axum: PG_MAJOR=17 bash test/run.sh rust runs it in trixie)"
		return
	fi
	log=$(mktemp /tmp/idempotency-rust.XXXXXX)
	run_logged "$log" bash test/rust.sh "$PG_BIN" "$RUST_WORK"
	rc=$?
	grep -v '^[0-9]* passed, [0-9]* failed$' "$log"
	count_lines "$log"
	[ "$rc" -ne 0 ] && [ "$COUNTED_FAILED" -eq 0 ] && fail "rust (test/rust.sh exited $rc)"
	rm -f "$log"
}

# The Debian packages the suites named need beyond $PACKAGES (http installs
# its own; citus: ../shared/citus/build.sh).
suite_packages()
{
	local s
	for s in "$@"; do
		case $s in
		bench) echo redis-server libhiredis-dev ;;
		valgrind) echo valgrind ;;
		package) echo devscripts libwww-perl ;; # uscan: debian/watch
		monitoring) echo prometheus-postgres-exporter jq curl ;;
		# pg_tle's build (../shared/pg_tle/build.sh); pg_cron below
		# test/edition/monitoring.sh: the exporter; pgtap below
		edition) echo build-essential flex bison libkrb5-dev libssl-dev prometheus-postgres-exporter jq curl ;;
		esac
	done
}

# Citus for the citus suite, built at the lowest priority while the suites
# before it run (../shared/citus/build.sh: it installs its build
# dependencies first, while no suite installs any): the run waits for it
# before suite citus, which builds it itself if this build failed.
CITUS_BUILD_PID=""
CITUS_BUILD_LOG=""
start_citus_build()
{
	case " $1 " in *" citus "*) ;; *) return 0 ;; esac
	[ -f ../shared/citus/build.sh ] && [ ! -f "$("$PG_BIN/pg_config" --pkglibdir)/citus.so" ] || return 0
	CITUS_BUILD_LOG=$(mktemp /tmp/idempotency-citus.XXXXXX)
	setsid nice -n 19 ionice -c 2 -n 7 env PG_CONFIG="$PG_BIN/pg_config" "${CITUS_BUILD_ENV[@]}" bash ../shared/citus/build.sh \
		>"$CITUS_BUILD_LOG" 2>&1 </dev/null &
	CITUS_BUILD_PID=$!
}

# Set the CPU priority (nice $2) of every process in session $1, a job
# started at the lowest (setsid nice -n 19 ionice -c 2 -n 7) that the run
# now waits for (0), or no longer (19); the I/O priority with it.  What
# they start from now inherits it.
session_priority()
{
	local pids="" p stat rest
	# from /proc, not ps: the runner calls this before the first version's
	# run has installed procps (a fresh machine has none)
	for p in /proc/[0-9]*; do
		read -r stat 2>/dev/null <"$p/stat" || continue
		rest=${stat##*) } # after "pid (comm) ": state ppid pgrp session ...
		read -r _ _ _ stat _ <<<"$rest"
		[ "$stat" = "$1" ] && pids="$pids ${p#/proc/}"
	done
	[ -n "$pids" ] || return 0
	# shellcheck disable=SC2086
	renice -n "$2" -p $pids >/dev/null 2>&1
	# shellcheck disable=SC2086
	ionice -c 2 -n "$([ "$2" -ge 19 ] && echo 7 || echo 4)" -p $pids >/dev/null 2>&1
	return 0
}

wait_citus_build()
{
	local t0=$SECONDS
	[ -n "$CITUS_BUILD_PID" ] || return 0
	session_priority "$CITUS_BUILD_PID" 0
	if wait "$CITUS_BUILD_PID"; then
		note "$(tail -n 1 "$CITUS_BUILD_LOG"), while the suites before ran; waited $((SECONDS - t0)) s for it"
	else
		note "the Citus build started with the run failed (suite citus builds it again):"
		tail -n 20 "$CITUS_BUILD_LOG"
	fi
	CITUS_BUILD_PID=""
	rm -f "$CITUS_BUILD_LOG"
	CITUS_BUILD_LOG=""
}

# --- every version: each in a run of its own ------------------------------
VERSION_SUMMARY=""
DIGEST=""

# The failures of the versions' logs (the files given), each with its
# first lines that say why: tap_failures' "  | not ok" lines, else lines
# of an error, at most six per failure and forty in all.  finish prints it
# last but for the counts, so that a log cut to its head and tail still
# says what failed and why.
failure_digest()
{
	awk '
	/^  FAILED  / { print; open = 1; n = 0; seen = 0; tap = 0; next }
	/^  (ok|skipped)  / || /^== / { open = 0; next }
	open && /\| not ok / { tap = 1 }
	open && seen < 200 && n < 6 && (/\| not ok / || (!tap && /(^not ok|--- FAIL|ERROR|FATAL|PANIC|panic:|panicked|Failures: [1-9]|Error:|error:)/)) {
		print "    " substr($0, 1, 300); n++
	}
	open { seen++ }' "$@" 2>/dev/null | head -n 40
}

# Print a version's run as it goes, renaming its closing lines so that this
# run's own stay the only ones: "N passed, N failed" -> "pgN summary: ...".
relabel()
{
	sed -u -E -e "s/^versions run: /  pg$1 run: /" -e "s/^([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/  pg$1 summary: \1 ok, \2 failed, \3 skipped/" \
		-e "s/^([0-9]+) passed, ([0-9]+) failed$/  pg$1 summary: \1 ok, \2 failed/" \
		-e "s/^failed:(.*)/  pg$1 failed:\1/"
}

# Count version $1's run (on $2, a name), its log $3 and exit status $4,
# into this run's: its "ok", "FAILED" and "skipped" lines; a run that
# failed without saying which test counts as a failure of its own.
count_version()
{
	local v=$1 where=$2 log=$3 rc=$4 p f k
	count_lines "$log"
	p=$COUNTED_OK f=$COUNTED_FAILED k=$COUNTED_SKIPPED
	if [ "$rc" != 0 ] && [ "$f" -eq 0 ] && ! { [ "$p" -eq 0 ] && [ "$k" -gt 0 ]; }; then
		FAILED=$((FAILED + 1))
		FAILURES="$FAILURES pg$v/run"
		printf '  FAILED  pg%s/run (exited %s)\n' "$v" "$rc"
		f=$((f + 1))
	fi
	VERSION_SUMMARY="$VERSION_SUMMARY${VERSION_SUMMARY:+, }pg$v on $where ($p ok, $f failed, $k skipped)"
}

# Run version $1's test run (on $2, a name; $3...: the command), showing its output as it
# goes, then count it.
run_version()
{
	local v=$1 where=$2 log=$RUNDIR/pg$1.log rc tailer
	shift 2
	: >"$log"
	setsid "$@" >"$log" 2>&1 </dev/null &
	CHILD=$!
	tail -n +1 -f --pid="$CHILD" "$log" 2>/dev/null | relabel "$v" &
	tailer=$!
	wait "$CHILD"
	rc=$?
	CHILD=""
	wait "$tailer"
	count_version "$v" "$where" "$log" "$rc"
}

# Make chroot $1 for version $2: the base system, then the tree
# as it is (uncommitted changes too, as on this system) and ../shared
# beside it when there is one.  Its output goes to $RUNDIR/pgN-chroot.log.
chroot_setup()
{
	local root=$1 v=$2
	chroot_make "$root" "$(chroot_suite "$v")" "$v" >"$RUNDIR/pg$v-chroot.log" 2>&1 || return 1
	mkdir -p "$root/work/project"
	tar --exclude=./.git --exclude=./results --exclude='./regression.*' --exclude='./tmp_check*' \
		--exclude=./log --exclude=./test/output_iso --exclude=./test/results --exclude=./test/tmp_check \
		--exclude=node_modules --exclude='*.o' --exclude='*.bc' --exclude='*.so' -cf - . |
		tar -C "$root/work/project" -xf -
	if [ -d ../shared ]; then cp -a ../shared/. "$root/work/shared/"; fi
}

# The chroots' versions made ahead, one after another, while the first
# version runs on this system: each one's base system unpacked (debootstrap
# run once per Debian release and machine), its packages installed, the
# extension built and installed (and Citus, for a version with the citus
# suite), at the lowest CPU and I/O priority so that the running suites
# keep the machine.  Nothing is tested there: run_in_chroot (in the
# runner) runs the version's suites in it, and does any step left undone
# itself.  For each version it leaves in $RUNDIR pgN.made (the
# chroot exists) and pgN.prepared (everything ran), then pgN.done.
PREPARE_PID=""
declare -A PREPARED_ROOT=()
prepare_one()
{
	local v=$1 root=$2 suites=$3
	chroot_setup "$root" "$v" || return
	: >"$RUNDIR/pg$v.made"
	chroot_exec "$root" "IDEM_IN_CHROOT=1 IDEM_PREPARE_ONLY=1 PG_MAJOR=$v IDEM_CITUS_VERSIONS='$IDEM_CITUS_VERSIONS' bash test/run.sh $suites" \
		"$(chroot_apt_cache "$v")" >"$RUNDIR/pg$v-prepare.log" 2>&1 &&
		: >"$RUNDIR/pg$v.prepared"
}
# Stop making chroots ahead, and remove those made.
stop_preparing()
{
	local v
	[ -n "$PREPARE_PID" ] && kill -TERM -- "-$PREPARE_PID" 2>/dev/null
	PREPARE_PID=""
	for v in "${!PREPARED_ROOT[@]}"; do
		chroot_remove "${PREPARED_ROOT[$v]}"
	done
	PREPARED_ROOT=()
}
prepare_chroots()
{
	local v
	local -a args=()
	for v in $VERSIONS; do
		runs_here "$v" && continue
		PREPARED_ROOT[$v]=$(mktemp -d /var/tmp/idempotency-pg"$v".XXXXXX)
		args+=("$v" "${PREPARED_ROOT[$v]}" "$(suites_of "$v")")
	done
	[ ${#args[@]} -gt 0 ] || return 0
	# debootstrap now, while this system's apt is free
	command -v debootstrap >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } >/dev/null 2>&1
	setsid nice -n 19 ionice -c 2 -n 7 bash -c '
		. test/lib/common.sh && . test/lib/chroot.sh || exit 1
		eval "$(cat)"
		RUNDIR=$1 IDEM_CITUS_VERSIONS=$2
		shift 2
		while [ $# -ge 3 ]; do
			prepare_one "$1" "$2" "$3"
			: >"$RUNDIR/pg$1.done"
			shift 3
		done
	' prepare "$RUNDIR" "$IDEM_CITUS_VERSIONS" "${args[@]}" >"$RUNDIR/prepare.log" 2>&1 \
		< <(declare -f chroot_setup prepare_one) &
	PREPARE_PID=$!
}

# The suites version $1 runs.
suites_of()
{
	echo "${SUITES_GIVEN:-$(default_suites "$1")}"
}

# The versions run in chroots are run by a job of their own, the runner
# (run_chroot_versions), in order, each as soon as its chroot is prepared:
# beside the version this system runs, not after it, and two at once once
# this system's version has ended.  One version's run keeps about 1.2 of
# the 2 cores busy on average (its servers wait on locks, sleeps and
# timeouts), so two at once take far less time than one after the other,
# and every version runs beside another's load.  Each version's output
# goes to $RUNDIR/pgN.log, shown when its turn comes (show_version), in
# order; $RUNDIR/pgN.rc says it ended (its exit status), $RUNDIR/pgN.summary
# replaces the count when its chroot could not be made, $RUNDIR/pgN.root
# names its chroot while it has one.
RUNNER_PID=""
RUNNER_ROOT=""
RUNNER_CHILD=""

# In the runner: version $1's suites ($3) in the chroot prepare_chroots makes
# at $2 (waiting for it), or in one made now; its output is the log's.
run_in_chroot()
{
	local v=$1 root=$2 suites=$3 suite prepared="" rc
	suite=$(chroot_suite "$v")
	RUNNER_ROOT=$root
	echo "$root" >"$RUNDIR/pg$v.root"
	# nothing else prepares now: at the lowest priority, on a loaded
	# machine, the job could wait for a CPU indefinitely
	if [ ! -e "$RUNDIR/pg$v.done" ] && [ -n "$PREPARE_PID" ]; then
		session_priority "$PREPARE_PID" 0
		while [ ! -e "$RUNDIR/pg$v.done" ] && kill -0 "$PREPARE_PID" 2>/dev/null; do
			sleep 1
		done
		# back to the lowest while this system's version runs; after it,
		# what is prepared is waited for
		[ -e "$RUNDIR/here.ended" ] || session_priority "$PREPARE_PID" 19
	fi
	if [ -e "$RUNDIR/pg$v.prepared" ]; then
		prepared=1
		note "chroot made, packages installed and extension built ahead, at the lowest priority"
	elif [ ! -e "$RUNDIR/pg$v.made" ]; then
		# not made ahead: make it now
		rm -rf --one-file-system "$root"
		root=$(mktemp -d /var/tmp/idempotency-pg"$v".XXXXXX)
		RUNNER_ROOT=$root
		echo "$root" >"$RUNDIR/pg$v.root"
		if ! chroot_setup "$root" "$v"; then
			cat "$RUNDIR/pg$v-chroot.log"
			if fetch_failed "$RUNDIR/pg$v-chroot.log"; then
				printf '  skipped pg%s (Debian %s could not be fetched: not tested)\n' "$v" "$suite"
				echo "pg$v $suite (not fetched: skipped)" >"$RUNDIR/pg$v.summary"
			else
				printf '  FAILED  pg%s/chroot\n' "$v"
				echo "pg$v $suite (chroot failed)" >"$RUNDIR/pg$v.summary"
			fi
			chroot_remove "$root"
			RUNNER_ROOT=""
			return 1
		fi
	fi
	# the PostgreSQL this system runs, for the major upgrade test, once
	# this system's run (if any) has built and installed the extension
	case " $suites " in
	*" tap "*)
		if [ "$v" != "$OLD_MAJOR" ]; then
			while [ ! -e "$RUNDIR/here.built" ] && [ ! -e "$RUNDIR/here.ended" ]; do
				sleep 1
			done
			chroot_add_old_install "$root" "$OLD_MAJOR" ||
				echo "  (no PostgreSQL $OLD_MAJOR with idempotency installed here: the major upgrade test skips)"
		fi
		;;
	esac
	note "started $((SECONDS - START)) s into the whole run"
	setsid bash -c '. test/lib/chroot.sh && chroot_exec "$@"' chroot_exec "$root" \
		"IDEM_IN_CHROOT=1 ${prepared:+IDEM_PREPARED=1 }PG_MAJOR=$v IDEM_CITUS_VERSIONS='$IDEM_CITUS_VERSIONS' bash test/run.sh $suites" \
		"$(chroot_apt_cache "$v")" </dev/null &
	RUNNER_CHILD=$!
	wait "$RUNNER_CHILD"
	rc=$?
	RUNNER_CHILD=""
	chroot_remove "$root"
	RUNNER_ROOT=""
	return "$rc"
}

# The runner's body: the versions given as "version root suites" triples,
# each run by a lane of its own (a subshell): one lane at a time while this
# system's version runs, two once it has ended (here.ended).
RUNNER_LANES=()
run_chroot_versions()
{
	trap 'runner_lanes_stop' TERM INT
	trap - EXIT
	while [ $# -ge 3 ]; do
		while [ "$(runner_lanes)" -ge "$([ -e "$RUNDIR/here.ended" ] && echo 2 || echo 1)" ]; do
			sleep 1
		done
		(
			trap 'runner_stop' TERM INT
			run_in_chroot "$1" "$2" "$3" >"$RUNDIR/pg$1.log" 2>&1
			echo "$?" >"$RUNDIR/pg$1.rc.new" && mv "$RUNDIR/pg$1.rc.new" "$RUNDIR/pg$1.rc"
		) &
		RUNNER_LANES+=($!)
		shift 3
	done
	wait
}
# How many of the runner's lanes still run.
runner_lanes()
{
	local p n=0
	for p in "${RUNNER_LANES[@]}"; do
		kill -0 "$p" 2>/dev/null && n=$((n + 1))
	done
	echo "$n"
}
# The runner stopped (the run interrupted): each lane stops (runner_stop).
runner_lanes_stop()
{
	local p
	for p in "${RUNNER_LANES[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	wait
	exit 1
}
# A lane stopped: its version's run stops its own servers on SIGTERM; give
# it the time, then end what is left in the chroot.
runner_stop()
{
	if [ -n "$RUNNER_CHILD" ]; then
		kill -TERM -- "-$RUNNER_CHILD" 2>/dev/null
		for _ in $(seq 100); do
			kill -0 -- "-$RUNNER_CHILD" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL -- "-$RUNNER_CHILD" 2>/dev/null
	fi
	[ -n "$RUNNER_ROOT" ] && chroot_remove "$RUNNER_ROOT"
	exit 1
}
start_runner()
{
	local v
	local -a args=()
	for v in $VERSIONS; do
		runs_here "$v" && continue
		args+=("$v" "${PREPARED_ROOT[$v]}" "$(suites_of "$v")")
	done
	[ ${#args[@]} -gt 0 ] || return 0
	# its own session, so that stop_runner reaches all of it; its notes
	# count their seconds from the whole run's start, as this run's do
	setsid bash -c '
		. test/lib/common.sh && . test/lib/chroot.sh && . test/lib/suites.sh || exit 1
		eval "$(cat)"
		RUNDIR=$1 PREPARE_PID=$2 IDEM_CITUS_VERSIONS=$3 START=$((-$4))
		shift 4
		run_chroot_versions "$@"
	' runner "$RUNDIR" "$PREPARE_PID" "$IDEM_CITUS_VERSIONS" "$((SECONDS - START))" "${args[@]}" \
		>"$RUNDIR/runner.log" 2>&1 < <(declare -f chroot_setup run_in_chroot run_chroot_versions runner_lanes runner_lanes_stop runner_stop \
			session_priority) &
	RUNNER_PID=$!
}
stop_runner()
{
	local f
	[ -n "$RUNNER_PID" ] || return 0
	kill -TERM -- "-$RUNNER_PID" 2>/dev/null
	# runner_stop waits up to 20 s for each lane's version's run to stop
	for _ in $(seq 125); do
		kill -0 "$RUNNER_PID" 2>/dev/null || break
		sleep 0.2
	done
	kill -KILL -- "-$RUNNER_PID" 2>/dev/null
	# the chroots of its lanes, where they could not remove them
	for f in "$RUNDIR"/pg*.root; do
		[ -s "$f" ] && chroot_remove "$(cat "$f")"
	done
	RUNNER_PID=""
}

# Show version $1's run, which the runner runs (or ran), as it goes, then
# count it.
show_version()
{
	local v=$1 suite log=$RUNDIR/pg$1.log watcher tailer rc
	suite=$(chroot_suite "$v")
	say "PostgreSQL $v: in a Debian $suite chroot$([ "$v" = 19 ] && echo ' with experimental')"
	while [ ! -e "$log" ] && kill -0 "$RUNNER_PID" 2>/dev/null; do
		sleep 1
	done
	if [ ! -e "$log" ]; then
		: >"$log"
	fi
	# tail until the runner says the version ended (or the runner did)
	(while [ ! -e "$RUNDIR/pg$v.rc" ] && kill -0 "$RUNNER_PID" 2>/dev/null; do sleep 1; done) &
	watcher=$!
	tail -n +1 -f --pid="$watcher" "$log" 2>/dev/null | relabel "$v" &
	tailer=$!
	wait "$watcher"
	wait "$tailer"
	if [ -e "$RUNDIR/pg$v.summary" ]; then
		count_lines "$log"
		VERSION_SUMMARY="$VERSION_SUMMARY${VERSION_SUMMARY:+, }$(cat "$RUNDIR/pg$v.summary")"
		return
	fi
	rc=$(cat "$RUNDIR/pg$v.rc" 2>/dev/null) || rc="none (the runner ended first: $(tail -n 3 "$RUNDIR/runner.log" | tr '\n' ' '))"
	count_version "$v" "$suite" "$log" "$rc"
}

run_all_versions()
{
	local v
	echo "idempotency test run: PostgreSQL $VERSIONS, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores"
	START=$SECONDS
	PG_MAJOR=${VERSIONS// /,} # this run's own lines (an interruption) name them all
	RUNDIR=$(mktemp -d /tmp/idempotency-versions.XXXXXX)
	prepare_chroots
	# the chroots' major upgrade test copies this system's version once it
	# is built (here.built), or as it is (here.ended)
	local here=""
	for v in $VERSIONS; do runs_here "$v" && here=1; done
	[ -n "$here" ] || : >"$RUNDIR/here.ended"
	start_runner
	for v in $VERSIONS; do
		if runs_here "$v"; then
			say "PostgreSQL $v: on this system ($(host_codename))"
			# shellcheck disable=SC2046 # the suites: words
			run_version "$v" "$(host_codename)" env PG_MAJOR="$v" IDEM_CITUS_VERSIONS="$IDEM_CITUS_VERSIONS" \
				IDEM_BUILT_MARK="$RUNDIR/here.built" bash test/run.sh $(suites_of "$v")
			: >"$RUNDIR/here.ended"
		else
			show_version "$v"
		fi
	done
	stop_runner
	stop_preparing
	if [ "$FAILED" -gt 0 ]; then
		local logs=()
		for v in $VERSIONS; do logs+=("$RUNDIR/pg$v.log"); done
		DIGEST=$(failure_digest "${logs[@]}")
		[ -n "$DIGEST" ] && DIGEST="failures, with the first lines of each (the whole output is above):
$DIGEST"
	fi
	rm -rf "$RUNDIR"
	echo
	echo "took $((SECONDS - START)) s"
	finish
}

SUITES_GIVEN="$*"
if [ "$(echo $VERSIONS | wc -w)" = 1 ] && runs_here "$VERSIONS"; then
	PG_MAJOR=$VERSIONS
	run_one_version "${SUITES_GIVEN:-$(default_suites "$PG_MAJOR")}"
else
	run_all_versions
fi
