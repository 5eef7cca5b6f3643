# shellcheck shell=bash disable=SC2034
# test/lib/common.sh: what test/run.sh, test/demo.sh, test/deb.sh,
# test/citus/checks.sh, bench/run.sh, bench/citus.sh and
# bench/expire_bench.sh share.  Source it from the
# repository root.  They run as root on Debian bookworm; PostgreSQL itself
# runs as the postgres OS user, because initdb, pg_ctl and pg_regress refuse
# to run as root.

# PG_MAJOR: the PostgreSQL major version to test, 15 unless set (test/run.sh
# runs 17, 18 and 19 in Debian chroots with PG_MAJOR set, test/lib/chroot.sh)
PG_MAJOR=${PG_MAJOR:-15}
# PG_BIN: Debian's PostgreSQL $PG_MAJOR unless set (a relocated copy, say)
PG_BIN=${PG_BIN:-/usr/lib/postgresql/$PG_MAJOR/bin}
PGXS_DIR=$(dirname "$PG_BIN")/lib/pgxs
# 19 comes from Debian experimental (on a forky base): its packages, and the
# libpq they need, are installed from experimental (apt_install)
PG_APT_RELEASE=""
[ "$PG_MAJOR" = 19 ] && PG_APT_RELEASE=experimental

# Debian package names (checked with dpkg -L / apt-cache on bookworm,
# trixie, forky and experimental):
#   postgresql-N           server, initdb, pg_ctl, contrib modules (amcheck,
#                          pgcrypto, ...) and pgbench; there is no
#                          postgresql-contrib-N
#   postgresql-client-N    psql, pg_dump, pg_basebackup, and PGXS's
#                          pg_regress, pg_isolation_regress, isolationtester
#                          and the PostgreSQL::Test::* Perl modules
#   postgresql-server-dev-N  server headers, pg_config, PGXS makefiles
#   postgresql-N-pgtap     the pgtap extension (test/run.sh's pgtap suite;
#                          not every version has one); libtap-parser-
#                          sourcehandler-pgtap-perl: pg_prove
#   libipc-run-perl        IPC::Run, needed by PostgreSQL::Test::Utils
#   build-essential debhelper postgresql-server-dev-all fakeroot libssl-dev:
#                          test/deb.sh (dpkg-buildpackage insists on
#                          build-essential; libssl-dev is a Build-Depends);
#                          autopkgtest: its run of debian/tests/
#   procps                 pgrep/ps (absent from minimal images)
#   redis-server libhiredis-dev: bench/run.sh (its Redis variants)
#   valgrind               the valgrind suite (memcheck)
PG_PACKAGES="postgresql-$PG_MAJOR postgresql-client-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libpq-dev"
[ -n "$PG_APT_RELEASE" ] && PG_PACKAGES="$PG_PACKAGES libpq5"
PACKAGES="make gcc libc6-dev perl procps $PG_PACKAGES
libtap-parser-sourcehandler-pgtap-perl libipc-run-perl build-essential debhelper
postgresql-server-dev-all fakeroot libssl-dev autopkgtest"

# How the test command builds Citus, which the citus suite builds only to
# test against (twice: for 15 and for 18), through ../shared/citus/build.sh's
# make: COPT (PGXS adds it last to CFLAGS) without optimisation or debug
# information, and no LLVM bitcode for the JIT (with_llvm=no, a command-line
# variable through MAKEFLAGS: Debian's PGXS has clang compile every file a
# second time, at -O2).  The extension's own builds keep the server's flags.
CITUS_BUILD_ENV=(COPT="-O0 -g0" MAKEFLAGS="with_llvm=no")

# The same results whatever the caller's environment: UTF-8 (the expected
# outputs contain non-ASCII text), no stray libpq settings.
export LANG=C.UTF-8 LC_ALL=C.UTF-8
unset LANGUAGE
for _v in $(env | sed -n 's/^\(PG[A-Z]*\)=.*/\1/p'); do unset "$_v"; done
unset _v

say() { printf '\n== %s\n' "$*"; }

# README's Citus recipe, the sql block of "Scaling out" after the comment
# naming test/citus/checks.sh, into $1/recipe.sql, and split at its
# "-- optional: delegate" line: $1/distribute.sql (the tables) and
# $1/delegate.sql (the functions); fails when README has no such block.
citus_recipe()
{
	local readme
	readme=$(dirname "${BASH_SOURCE[0]}")/../../README.md
	awk '/test\/citus\/checks.sh runs the next sql block/ { found = 1; next }
		found && /^ *```sql/ { inside = 1; next }
		inside && /^ *```/ { exit }
		inside { sub(/^  /, ""); print }' "$readme" >"$1/recipe.sql"
	{ echo '\set ON_ERROR_STOP 1'; sed '/^-- optional: delegate/,$d' "$1/recipe.sql"; } >"$1/distribute.sql"
	{ echo '\set ON_ERROR_STOP 1'; sed -n '/^-- optional: delegate/,$p' "$1/recipe.sql"; } >"$1/delegate.sql"
	chown postgres:postgres "$1/recipe.sql" "$1/distribute.sql" "$1/delegate.sql"
	grep -q idem_distribute "$1/distribute.sql" && grep -q idem_distribute "$1/delegate.sql"
}

# Install the Debian packages given (default: $PACKAGES) that are missing;
# runs apt-get update only when something is missing.
apt_install()
{
	local missing="" p pg
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
	done
	[ -n "$missing" ] || return 0
	say "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes
	apt-get update -qq || return 1
	# PostgreSQL's own packages from PG_APT_RELEASE (experimental) first,
	# as name/experimental: their dependencies stay the base release's
	# (apt-get -t experimental would take every one experimental has)
	pg=""
	if [ -n "$PG_APT_RELEASE" ]; then
		for p in $missing; do
			case " $PG_PACKAGES " in *" $p "*) pg="$pg $p/$PG_APT_RELEASE" ;; esac
		done
	fi
	# shellcheck disable=SC2086
	if [ -n "$pg" ]; then
		apt-get install -y -qq --no-install-recommends $pg </dev/null >/dev/null || return 1
	fi
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing </dev/null >/dev/null
}

# True when Debian offers package $1 here (after apt-get update).
apt_offers()
{
	local c
	c=$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p')
	[ -n "$c" ] && [ "$c" != "(none)" ]
}

# $PACKAGES and the packages given.
install_packages()
{
	# shellcheck disable=SC2086
	apt_install $PACKAGES "$@" || return 1
	# The tests run their own servers; Debian's default cluster is not used.
	id postgres >/dev/null 2>&1 || { echo "no postgres OS user after install" >&2; return 1; }
}

# Build with every warning an error (WERROR=1) and install into the
# system PostgreSQL.
build_and_install()
{
	say "build and install (PostgreSQL $PG_MAJOR, -Wall -Wextra -Werror)"
	make -s PG_CONFIG="$PG_BIN/pg_config" clean >/dev/null &&
		make -s PG_CONFIG="$PG_BIN/pg_config" WERROR=1 &&
		make -s PG_CONFIG="$PG_BIN/pg_config" WERROR=1 install >/dev/null
}

# The benchmark's SPI floor (bench/floor), built and installed beside the
# extension for bench/run.sh and bench/profile.sh; its functions come from
# bench/floor/floor.sql.
build_and_install_floor()
{
	make -s -C bench/floor PG_CONFIG="$PG_BIN/pg_config" clean >/dev/null &&
		make -s -C bench/floor PG_CONFIG="$PG_BIN/pg_config" &&
		make -s -C bench/floor PG_CONFIG="$PG_BIN/pg_config" install >/dev/null
}

# A copy of the tree that the postgres user owns, for servers and test
# outputs: WORK.  Created under $IDEM_TMP when set (test/run.sh sets it so
# that everything its child scripts start lives under its own directory).
make_workdir()
{
	WORK=$(mktemp -d "${IDEM_TMP:-/tmp}/idempotency-test.XXXXXX")
	tar --exclude=./.git --exclude=./results --exclude='./regression.*' \
		--exclude='./tmp_check*' --exclude=./log --exclude=./test/output_iso \
		--exclude=./test/results --exclude=./test/tmp_check -cf - . | tar -C "$WORK" -xf -
	mkdir "$WORK/tmp"
	chown -R postgres:postgres "$WORK"
	chmod 755 "$WORK"
}

# Run a command as the postgres user, in the work directory (the checkout
# may be where postgres cannot go, such as /root), PostgreSQL's tools first
# on PATH, temporary files in the work directory.
as_postgres()
{
	local dir=/ tmp=/tmp
	[ -n "${WORK:-}" ] && [ -d "$WORK/tmp" ] && dir=$WORK tmp=$WORK/tmp
	runuser -u postgres -- env -C "$dir" PATH="$PG_BIN:$PATH" TMPDIR="$tmp" "$@"
}

# A free TCP port on loopback, near $1's last four digits + 20000 (chosen at
# random, so that two runs at once rarely race for the same one): below
# Linux's ephemeral range (32768-60999), where outgoing connections take
# their local port, so that no client of this or another run holds the
# port when the server binds it ("Address already in use").
free_port()
{
	# two versions run at once (test/run.sh's runner) draw from windows
	# apart: 15 +0-199, 17 +400-599, 18 +600-799, 19 +800-999
	local port=$((20000 + $1 % 10000 + (PG_MAJOR - 15) % 5 * 200 + RANDOM % 200))
	while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		port=$((port + 1))
	done
	echo "$port"
}

# Start a throwaway server in $1 (data dir) on port $2, sockets in $WORK;
# $3: more postgresql.conf lines, if any.
start_server()
{
	local data=$1 port=$2 more=${3:-}
	as_postgres initdb -D "$data" -A trust --no-sync >/dev/null || return 1
	cat >>"$data/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$WORK'
shared_preload_libraries = '$([ "${PRELOAD:-1}" = 0 ] || echo idempotency,pg_stat_statements)'
fsync = on
$more
CONF
	as_postgres pg_ctl -D "$data" -l "$data/server.log" -w start >/dev/null ||
		{ tail -n 20 "$data/server.log" >&2; return 1; }
}

stop_server()
{
	local data=$1
	[ -f "$data/postmaster.pid" ] && as_postgres pg_ctl -D "$data" -m fast -w stop >/dev/null 2>&1
	return 0
}

# Stop every PostgreSQL server whose data directory lies under $1, however
# it was started (pg_ctl, pg_regress --temp-instance, PostgreSQL::Test::
# Cluster): immediate shutdown (SIGQUIT) of each postmaster found through
# its postmaster.pid, then wait for them to exit.
kill_servers_under()
{
	local dir=$1 pidfile pid pids="" alive
	[ -d "$dir" ] || return 0
	while IFS= read -r pidfile; do
		pid=$(head -n 1 "$pidfile" 2>/dev/null)
		case $pid in '' | *[!0-9]*) continue ;; esac
		[ "$(ps -o user= -p "$pid" 2>/dev/null)" = postgres ] || continue
		kill -QUIT "$pid" 2>/dev/null && pids="$pids $pid"
	done < <(find "$dir" -name postmaster.pid 2>/dev/null)
	for _ in $(seq 50); do
		alive=""
		for pid in $pids; do
			kill -0 "$pid" 2>/dev/null && alive="$alive $pid"
		done
		pids=$alive
		[ -z "$pids" ] && return 0
		sleep 0.2
	done
	for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
	return 0
}

# shellcheck source=test/lib/tap.sh
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"

# examples/conformance (node --test, each file of the tree at $2) against a
# payment service, EXAMPLE_CMD $5 (a JSON array), as the login role
# payments_service in database $4 of the server on 127.0.0.1:$3 (the
# superuser postgres for what a test does as an administrator).  One line
# per file, "$1/NAME (N cases)", through the caller's pass, fail,
# run_logged and tail_logs; logs under $WORK.  suite_http (each example
# service) and test/rust.sh (the Rust one) run it.
run_conformance()
{
	local label=$1 tree=$2 port=$3 db=$4 cmd=$5 f name log
	for f in "$tree"/examples/conformance/*.test.js; do
		name=$(basename "$f" .test.js)
		log=$WORK/conformance_${label//\//_}_$name
		: >"$log.services"
		if run_logged "$log.log" env -C "$tree/examples/conformance" PATH="$PG_BIN:$PATH" \
			PGHOST=127.0.0.1 PGPORT="$port" PGUSER=payments_service PGDATABASE="$db" \
			PGSSLMODE=disable CONFORMANCE_ADMIN_USER=postgres CONFORMANCE_LOG="$log.services" \
			EXAMPLE_CMD="$cmd" node --test "$name.test.js"; then
			pass "$label/$name ($(grep -c '^ok ' "$log.log") cases)"
		else
			fail "$label/$name"
			show_tap "$log.log"
			tail_logs "$log.services"
		fi
	done
}
