#!/usr/bin/env bash
# test/suite.sh SUITE: one of the test command's slow suites against the
# PostgreSQL the Makefile's PG_CONFIG names, with the extension already
# built and installed for it (make install).  The make targets call it:
#
#   make check-valgrind    pg_regress and the isolation specs again, against
#                          one server run under valgrind's memcheck
#   make check-citus       a Citus cluster on loopback (test/citus/)
#   make check-examples    the HTTP services of examples/ against their
#                          conformance suite (the suite named http)
#   make check-package     the version's Debian package, built, installed, used
#   make check-bench       bench/run.sh --check: exactly-once under contention
#   make check-monitoring  prometheus-postgres-exporter with monitoring/queries.yaml
#                          against two databases with traffic; the dashboard's
#                          metrics
#   (no make target)       bash test/suite.sh edition: the SQL edition
#                          (test/lib/suites.sh, suite_edition); test/run.sh
#                          installs what it needs (pg_tle's build
#                          dependencies, postgresql-N-cron)
#
# As root (servers run as the postgres OS user).  It installs nothing the
# suite does not fetch for itself (http: Node.js, Go and Java with their
# modules; citus: builds Citus from ../shared/citus when missing); what the
# others need (valgrind; redis-server and libhiredis-dev;
# prometheus-postgres-exporter, jq and curl) bash test/run.sh
# installs, and then calls these targets.  Prints a line per test ("ok",
# "FAILED" or "skipped", each naming the version), then
# "suite NAME: N ok, N failed, N skipped"; exits non-zero when one failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
. test/lib/common.sh
. test/lib/suites.sh

suite=${1:-}
case $suite in
valgrind | citus | http | package | bench | monitoring | edition) ;;
*) echo "usage: test/suite.sh valgrind|citus|http|package|bench|monitoring|edition (make check-...)" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "test/suite.sh: run as root (it starts servers as the postgres OS user)" >&2; exit 2; }
[ -x "$PG_BIN/pg_config" ] || { echo "test/suite.sh: no PostgreSQL at $PG_BIN" >&2; exit 2; }

PASSED=0
FAILED=0
SKIPPED=0
FAILURES=""
CHILD=""
WORK=""
cleanup()
{
	[ -n "$CHILD" ] && kill -TERM -- "-$CHILD" 2>/dev/null
	remove_workdir
}
trap cleanup EXIT
trap 'cleanup; fail "$suite (interrupted)"; exit 130' INT TERM

missing=""
case $suite in
valgrind) command -v valgrind >/dev/null || missing=valgrind ;;
bench) command -v redis-server >/dev/null || missing=redis-server ;;
monitoring) command -v prometheus-postgres-exporter >/dev/null || missing=prometheus-postgres-exporter ;;
esac
if [ -n "$missing" ]; then
	fail "$suite ($missing is not installed: bash test/run.sh $suite installs it)"
else
	make_workdir
	MAKE_PG=(runuser -u postgres -- env TMPDIR="$WORK/tmp" make -C "$WORK" --no-print-directory
		PG_CONFIG="$PG_BIN/pg_config")
	export IDEM_TMP=$WORK # test/deb.sh puts its files under ours
	"suite_$suite"
fi
echo "suite $suite: $PASSED ok, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" -eq 0 ]
