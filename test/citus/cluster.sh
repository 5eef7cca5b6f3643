#!/usr/bin/env bash
# test/citus/cluster.sh: a throwaway Citus cluster on loopback,
# 1 coordinator + 2 workers, with citus and idempotency in every node's
# database "postgres".
#
#   bash test/citus/cluster.sh start DIR   (or: cluster.sh DIR)
#   bash test/citus/cluster.sh stop DIR
#   bash test/citus/cluster.sh psql DIR [coordinator|worker1|worker2] [psql args...]
#
# As root.  The server: PG_BIN (a PostgreSQL bin directory), else
# PG_CONFIG's --bindir, else Debian's PostgreSQL 15 (test/lib/common.sh).
# Needs Citus installed into it (13.2.2 on 15, 14.0.1 on 16-18:
# PG_CONFIG=... ../shared/citus/build.sh) and this extension installed
# there (make PG_CONFIG=... install).  Log lines carry the backend type (%b), so that
# background workers' lines can be told from client backends'.
# The servers run as the postgres OS user; their data directories, logs and
# Unix sockets live under DIR (created if missing, then given to postgres).
# shared_preload_libraries = 'citus,idempotency' (citus must come first);
# trust authentication on 127.0.0.1.  The worker nodes are registered with
# citus_set_coordinator_host and citus_add_node.  On success it prints one
# line per node, "NAME PORT DATADIR", writes the same to DIR/ports and
# DIR/cluster.env (COORDINATOR_PORT=..., WORKER1_PORT=..., WORKER2_PORT=...)
# and exits 0.  A failed start stops whatever it started.  `stop` stops every
# server under DIR (fast shutdown, then SIGQUIT for any that remain).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -z "${PG_BIN:-}" ] && [ -n "${PG_CONFIG:-}" ]; then
	PG_BIN=$("$PG_CONFIG" --bindir) || exit 2
	export PG_BIN
fi
# shellcheck source=test/lib/common.sh
. "$here/../lib/common.sh"

NODES="coordinator worker1 worker2"
STARTED="" # nodes this run started: a failed start stops these only

usage()
{
	echo "usage: $0 start DIR | stop DIR | psql DIR [node] [psql args]" >&2
	exit 2
}

# psql on a node as postgres, through the node's Unix socket in DIR
node_psql()
{
	local port=$1
	shift
	as_postgres psql -X -q -h "$DIR" -p "$port" -d postgres -v ON_ERROR_STOP=1 "$@"
}

port_of()
{
	awk -v n="$1" '$1 == n { print $2 }' "$DIR/ports" 2>/dev/null
}

# initdb and start one node in $DIR/$1 on port $2
start_node()
{
	local name=$1 port=$2 data=$DIR/$1
	as_postgres initdb -D "$data" -A trust -U postgres --no-sync >"$DIR/$name.initdb.log" 2>&1 ||
		{ cat "$DIR/$name.initdb.log" >&2; return 1; }
	cat >>"$data/postgresql.conf" <<CONF
# test/citus/cluster.sh
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR'
shared_preload_libraries = 'citus,idempotency'
max_connections = 100
max_prepared_transactions = 50
shared_buffers = 32MB
fsync = on
wal_level = logical
citus.node_conninfo = 'sslmode=disable'
log_line_prefix = '%m [%p] %b %q%a '
CONF
	as_postgres pg_ctl -D "$data" -l "$data/server.log" -w -t 60 start >/dev/null ||
		{ tail -n 20 "$data/server.log" >&2; return 1; }
}

# Stop the nodes named (fast shutdown), then SIGQUIT any server left in their
# data directories
stop_nodes()
{
	local name data
	for name in "$@"; do
		data=$DIR/$name
		[ -f "$data/postmaster.pid" ] &&
			as_postgres pg_ctl -D "$data" -m fast -w -t 30 stop >/dev/null 2>&1
		kill_servers_under "$data"
	done
	return 0
}

do_stop()
{
	# shellcheck disable=SC2086 # a list of node names
	stop_nodes $NODES
	# anything else left under DIR (a node started by hand, a stuck shutdown)
	kill_servers_under "$DIR"
}

do_start()
{
	local name port base=56000 coord pkglib
	command -v runuser >/dev/null || { echo "runuser is missing" >&2; return 1; }
	pkglib=$("$PG_BIN/pg_config" --pkglibdir) || return 1
	[ -f "$pkglib/citus.so" ] ||
		{ echo "citus is not installed in $pkglib: run ../shared/citus/build.sh" >&2; return 1; }
	[ -f "$pkglib/idempotency.so" ] ||
		{ echo "idempotency is not installed in $pkglib: make install" >&2; return 1; }
	for name in $NODES; do
		[ -e "$DIR/$name" ] && { echo "$DIR/$name exists: stop and remove it first" >&2; return 1; }
	done
	mkdir -p "$DIR/tmp"
	chown postgres:postgres "$DIR" "$DIR/tmp"
	chmod 755 "$DIR"
	WORK=$DIR # as_postgres runs in $WORK with TMPDIR=$WORK/tmp
	: >"$DIR/ports"
	for name in $NODES; do
		port=$(free_port $base)
		base=$((port + 1))
		STARTED="$STARTED $name"
		start_node "$name" "$port" || return 1
		echo "$name $port $DIR/$name" >>"$DIR/ports"
	done
	for name in $NODES; do
		node_psql "$(port_of "$name")" -c "CREATE EXTENSION citus" \
			-c "CREATE EXTENSION idempotency" || return 1
	done
	coord=$(port_of coordinator)
	node_psql "$coord" -c "SELECT citus_set_coordinator_host('127.0.0.1', $coord)" >/dev/null || return 1
	for name in worker1 worker2; do
		node_psql "$coord" -c "SELECT citus_add_node('127.0.0.1', $(port_of "$name"))" >/dev/null || return 1
	done
	# ready: every worker active in the coordinator's metadata
	[ "$(node_psql "$coord" -At -c "SELECT count(*) FROM pg_dist_node WHERE isactive AND noderole = 'primary'")" = 3 ] ||
		{ echo "the nodes did not all become active" >&2; return 1; }
	{
		echo "COORDINATOR_PORT=$(port_of coordinator)"
		echo "WORKER1_PORT=$(port_of worker1)"
		echo "WORKER2_PORT=$(port_of worker2)"
		echo "CLUSTER_SOCKET_DIR=$DIR"
	} >"$DIR/cluster.env"
	chown postgres:postgres "$DIR/ports" "$DIR/cluster.env"
	cat "$DIR/ports"
}

[ "$(id -u)" = 0 ] || { echo "$0: run as root (servers run as the postgres OS user)" >&2; exit 2; }
case ${1:-} in
	start | stop | psql) cmd=$1; shift ;;
	'') usage ;;
	*) cmd=start ;;
esac
[ $# -ge 1 ] || usage
mkdir -p "$1" 2>/dev/null
DIR=$(cd "$1" 2>/dev/null && pwd) || { echo "no directory $1" >&2; exit 2; }
shift
case $cmd in
	start)
		if ! do_start; then
			echo "cluster.sh: start failed; stopping what it started:${STARTED:- nothing}" >&2
			for name in $STARTED; do tail -n 5 "$DIR/$name/server.log" 2>/dev/null >&2; done
			# shellcheck disable=SC2086 # a list of node names
			stop_nodes $STARTED
			exit 1
		fi
		;;
	stop)
		WORK=$DIR
		do_stop
		;;
	psql)
		WORK=$DIR
		node=${1:-coordinator}
		[ $# -gt 0 ] && shift
		port=$(port_of "$node")
		[ -n "$port" ] || { echo "no node $node in $DIR/ports" >&2; exit 2; }
		node_psql "$port" "$@"
		;;
esac
