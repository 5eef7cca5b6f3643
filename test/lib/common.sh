# test/lib/common.sh: what test/run.sh and test/demo.sh share.  Source it
# from the repository root.  Runs as root on Debian bookworm; PostgreSQL
# itself runs as the postgres OS user, which initdb and pg_regress require.

PG_MAJOR=15
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
PGXS_DIR=/usr/lib/postgresql/$PG_MAJOR/lib/pgxs
PG_CFLAGS_STRICT="-Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare"
# -Wno-unused-parameter, -Wno-sign-compare: PostgreSQL's own headers and
# fmgr conventions (PG_FUNCTION_ARGS) trip these; everything else is an error.

PACKAGES="make gcc postgresql-$PG_MAJOR postgresql-client-$PG_MAJOR postgresql-server-dev-$PG_MAJOR
postgresql-$PG_MAJOR-pgtap libtap-parser-sourcehandler-pgtap-perl libipc-run-perl perl
debhelper postgresql-server-dev-all dpkg-dev fakeroot"

say() { printf '\n== %s\n' "$*"; }

# Install the Debian packages that are missing (apt-get update only then).
install_packages()
{
	local missing=""
	for p in $PACKAGES; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		say "installing:$missing"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		# shellcheck disable=SC2086
		apt-get install -y -qq --no-install-recommends $missing >/dev/null
	fi
	# Debian's postgresql-common may start a default cluster; tests use their own.
	id postgres >/dev/null 2>&1 || { echo "no postgres OS user after install" >&2; return 1; }
}

# Build with warnings as errors and install into the system PostgreSQL.
build_and_install()
{
	say "build (PG_CFLAGS=$PG_CFLAGS_STRICT) and install"
	make -s clean >/dev/null
	make -s PG_CONFIG="$PG_BIN/pg_config" PG_CFLAGS="$PG_CFLAGS_STRICT" &&
		make -s PG_CONFIG="$PG_BIN/pg_config" install >/dev/null
}

# A copy of the tree the postgres user owns, for servers and test outputs.
make_workdir()
{
	WORK=$(mktemp -d /tmp/idempotency-test.XXXXXX)
	tar --exclude=.git -cf - . | tar -C "$WORK" -xf -
	chown -R postgres:postgres "$WORK"
	chmod 755 "$WORK"
}

# Run a command as the postgres user with PostgreSQL's tools first on PATH.
as_postgres()
{
	runuser -u postgres -- env PATH="$PG_BIN:$PATH" "$@"
}

# A free TCP port on loopback.
free_port()
{
	local port=$1
	while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		port=$((port + 1))
	done
	echo "$port"
}

# Start a throwaway server in $1 (data dir) on port $2, sockets in $WORK.
start_server()
{
	local data=$1 port=$2
	as_postgres initdb -D "$data" -A trust --no-sync >/dev/null
	cat >>"$data/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$WORK'
shared_preload_libraries = 'idempotency'
fsync = on
CONF
	as_postgres pg_ctl -D "$data" -l "$data/server.log" -w start >/dev/null
}

stop_server()
{
	local data=$1
	[ -f "$data/postmaster.pid" ] && as_postgres pg_ctl -D "$data" -m fast -w stop >/dev/null 2>&1
	return 0
}
