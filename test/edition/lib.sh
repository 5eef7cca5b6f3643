# shellcheck shell=bash
# test/edition/lib.sh: what the edition's test scripts share (sourced, not
# run).  A script sets DIR (its scratch directory), PORT and DATA
# ($DIR/data) and failed=0 before it calls these.

# "not ok LABEL", the details (if any) as # lines; the script fails
notok() {
	# shellcheck disable=SC2034 # the sourcing script reads it
	failed=1
	echo "not ok $1"
	[ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/# /'
	return 0
}

# psql as role $1 in database $2 over the server's socket, the rest its
# arguments; stops at the first error; output and errors together
q() {
	local role=$1 db=$2
	shift 2
	psql -X -qAt -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U "$role" -d "$db" "$@" 2>&1
}

# edition_server LABEL [CONF...]: a new server in $DATA on $PORT, its socket
# in $DIR, with each CONF line added to postgresql.conf; started, and
# stopped when the script exits (a script that needs more at exit sets its
# own trap after this).  On failure "not ok LABEL (...)" and exit 1.
edition_server() {
	local label=$1 line
	shift
	rm -rf "$DATA"
	mkdir -p "$DIR"
	if ! initdb -D "$DATA" -A trust -U postgres --no-sync >"$DIR/initdb.log" 2>&1; then
		notok "$label (initdb)" "$(tail -n 20 "$DIR/initdb.log")"
		exit 1
	fi
	{
		echo "port = $PORT"
		echo "unix_socket_directories = '$DIR'"
		for line in "$@"; do echo "$line"; done
	} >>"$DATA/postgresql.conf"
	if ! pg_ctl -D "$DATA" -l "$DIR/server.log" -w start >/dev/null; then
		notok "$label (the server did not start)" "$(tail -n 20 "$DIR/server.log")"
		exit 1
	fi
	trap 'pg_ctl -D "$DATA" -m fast -w stop >/dev/null 2>&1' EXIT
}
