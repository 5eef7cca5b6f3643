#!/usr/bin/env bash
# test/rust.sh PG_BIN WORKDIR: the Rust crate (clients/rust, pg-idempotency)
# and the Axum payments service on it (examples/rust) against a throwaway
# server of PostgreSQL PG_BIN, end to end:
#
#   1. the Debian packages it needs, when missing (rustc, cargo, the
#      librust-*-dev crates, nodejs; apt_install of test/lib/common.sh);
#      the extension itself, built from a copy of the tree and installed
#      into PG_BIN's PostgreSQL, when that has none;
#   2. both crates built OFFLINE from Debian's packaged crates: cargo's
#      source replacement to /usr/share/cargo/registry, in a CARGO_HOME of
#      WORKDIR's (nothing in the tree forces it on other builds);
#   3. a cluster (initdb as postgres, loopback, the extension preloaded), a
#      login role payments_service and a database set up by
#      examples/db/schema.sql as the superuser;
#   4. cargo test of the crate, its database tests against that database
#      as payments_service (IDEM_TEST_DATABASE_URL);
#   5. the service, as payments_service, against every file of
#      examples/conformance (node --test), as test/lib/suites.sh's
#      suite_http runs the other services.
#
# One line per check in the test command's style ("  ok      pg17/rust/card
# (3 cases)" or "  FAILED  ..." with the log after it), a note with
# each step's time, "N passed, N failed" at the end; exits non-zero on any
# failure.  Everything it starts (the server, services the suite left) is
# stopped on exit.  As root, on Debian trixie or later (bookworm ships no
# librust-axum-dev 0.7): test/run.sh's trixie chroot for PostgreSQL 17.
# It runs at its caller's priority: test/run.sh builds ahead at nice 19
# and raises the build's priority when a version waits for it, then runs
# the tests at the priority of the run.  A WORKDIR used before keeps its build
# (cargo's target directory: the next build is incremental); the server and
# the logs are made anew.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
PG_BIN_ARG=${1:?usage: test/rust.sh PG_BIN WORKDIR}
WORK_ARG=${2:?usage: test/rust.sh PG_BIN WORKDIR}
# "postgres (PostgreSQL) 17.6 (Debian ...)": 17; before common.sh, which
# picks the apt release of PG_MAJOR's packages
PG_MAJOR=$("$PG_BIN_ARG/postgres" --version 2>/dev/null | awk '{ print $3 }' | sed 's/[^0-9].*//')
[ -n "$PG_MAJOR" ] || { echo "no PostgreSQL in $PG_BIN_ARG" >&2; exit 2; }
# shellcheck source=test/lib/common.sh
. test/lib/common.sh
PG_BIN=$PG_BIN_ARG
mkdir -p "$WORK_ARG" || exit 2
WORK=$(cd "$WORK_ARG" && pwd)

# The crates' direct dependencies (clients/rust/Cargo.toml,
# examples/rust/Cargo.toml) as Debian packages; apt pulls in the rest.
RUST_PACKAGES="rustc cargo librust-axum-dev librust-tokio-dev librust-tokio-postgres-dev
librust-deadpool-dev librust-serde-json-dev librust-hyper-dev librust-hyper-util-dev librust-http-dev
librust-http-body-util-dev librust-bytes-dev librust-mime-dev librust-log-dev librust-tower-dev
librust-tower-layer-dev librust-tower-service-dev librust-futures-core-dev nodejs"

PASSED=0 FAILED=0
pass() { PASSED=$((PASSED + 1)); printf '  ok      pg%s/%s\n' "$PG_MAJOR" "$1"; }
fail() { FAILED=$((FAILED + 1)); printf '  FAILED  pg%s/%s\n' "$PG_MAJOR" "$1"; }
note() { printf '  (%s)\n' "$*"; }
tail_logs() {
	local f
	for f in "$@"; do
		[ -f "$f" ] || continue
		echo "--- $f (last 40 lines)"
		tail -n 40 "$f"
	done
}

# A command in a process group of its own, so that what it leaves running
# (services a test file did not stop) can be ended with it.
CHILD=""
run_logged() {
	local log=$1 rc
	shift
	setsid "$@" >"$log" 2>&1 </dev/null &
	CHILD=$!
	wait "$CHILD"
	rc=$?
	kill -KILL -- "-$CHILD" 2>/dev/null
	CHILD=""
	return "$rc"
}

# shellcheck disable=SC2317 # called by the trap
cleanup() {
	[ -n "$CHILD" ] && kill -KILL -- "-$CHILD" 2>/dev/null
	stop_server "$WORK/data"
	kill_servers_under "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

finish() {
	printf '%s passed, %s failed\n' "$PASSED" "$FAILED"
	[ "$FAILED" -eq 0 ]
	exit
}

# ---- 1. packages, the extension ------------------------------------------
t0=$SECONDS
# shellcheck disable=SC2086 # a list of package names
if ! apt_install $RUST_PACKAGES >"$WORK/apt.log" 2>&1; then
	fail "rust (apt-get install)"
	tail_logs "$WORK/apt.log"
	finish
fi
note "Debian packages: $((SECONDS - t0)) s; rustc $(rustc --version | cut -d' ' -f2), node $(node --version)"
if [ ! -f "$("$PG_BIN/pg_config" --sharedir)/extension/idempotency.control" ]; then
	t0=$SECONDS
	rm -rf "$WORK/ext" && mkdir -p "$WORK/ext"
	tar --exclude=./.git --exclude='./clients/rust/target' --exclude='./examples/rust/target' -cf - . |
		tar -C "$WORK/ext" -xf -
	if ! apt_install make gcc libc6-dev "postgresql-server-dev-$PG_MAJOR" >"$WORK/ext.log" 2>&1 ||
		! make -C "$WORK/ext" -s PG_CONFIG="$PG_BIN/pg_config" >>"$WORK/ext.log" 2>&1 ||
		! make -C "$WORK/ext" -s PG_CONFIG="$PG_BIN/pg_config" install >>"$WORK/ext.log" 2>&1; then
		fail "rust (build and install the extension)"
		tail_logs "$WORK/ext.log"
		finish
	fi
	note "the extension built and installed: $((SECONDS - t0)) s"
fi

# ---- 2. build, offline -----------------------------------------------------
# A copy of the crates and the suite: cargo writes Cargo.lock beside each
# manifest, and the tree may be read-only.
rm -rf "$WORK/tree" && mkdir -p "$WORK/tree"
tar --exclude=target --exclude=Cargo.lock -cf - clients/rust examples/rust examples/conformance examples/db |
	tar -C "$WORK/tree" -xf -
# no debug information: a shorter build ahead, and a failing test's
# backtrace still names its functions
export CARGO_HOME=$WORK/cargo-home CARGO_TARGET_DIR=$WORK/target CARGO_PROFILE_DEV_DEBUG=0
mkdir -p "$CARGO_HOME"
cat >"$CARGO_HOME/config.toml" <<'CONF'
# Debian's packaged crates (librust-*-dev) instead of crates.io
[source.crates-io]
replace-with = "debian"

[source.debian]
directory = "/usr/share/cargo/registry"

[net]
offline = true
CONF
t0=$SECONDS
if cargo build --offline --manifest-path "$WORK/tree/examples/rust/Cargo.toml" >"$WORK/build.log" 2>&1 &&
	cargo test --offline --no-run --manifest-path "$WORK/tree/clients/rust/Cargo.toml" >>"$WORK/build.log" 2>&1; then
	if grep -q '^warning' "$WORK/build.log"; then
		fail "rust/build (warnings)"
		grep -A 8 '^warning' "$WORK/build.log"
	else
		n=$(grep -c '^ *Compiling' "$WORK/build.log")
		if [ "$n" -eq 0 ]; then
			pass "rust/build (offline; up to date, built before in $WORK)"
		else
			pass "rust/build (offline, $n crates compiled)"
		fi
	fi
	note "cargo build and cargo test --no-run: $((SECONDS - t0)) s"
else
	fail "rust/build"
	tail_logs "$WORK/build.log"
	finish
fi
SERVICE=$CARGO_TARGET_DIR/debug/payments-rust
# IDEM_RUST_BUILD_ONLY=1: this far (test/run.sh builds ahead, while another
# version runs; its own run then reuses the build)
[ "${IDEM_RUST_BUILD_ONLY:-}" = 1 ] && finish

# ---- 3. the server -----------------------------------------------------------
# made anew in a WORKDIR used before (whose build is reused: incremental)
stop_server "$WORK/data"
kill_servers_under "$WORK"
rm -rf "$WORK/data" "$WORK"/conformance_*
mkdir -p "$WORK/tmp"
chown postgres:postgres "$WORK" "$WORK/tmp"
chmod 755 "$WORK"
port=$(free_port 55538)
db=examples_rust
if ! start_server "$WORK/data" "$port" >"$WORK/server.log" 2>&1 ||
	! as_postgres psql -X -q -h "$WORK" -p "$port" -d postgres -v ON_ERROR_STOP=1 \
		-c "CREATE ROLE payments_service LOGIN" -c "CREATE DATABASE $db" >>"$WORK/server.log" 2>&1 ||
	! as_postgres psql -X -q -h "$WORK" -p "$port" -d "$db" -v service_role=payments_service \
		-f "$WORK/tree/examples/db/schema.sql" >>"$WORK/server.log" 2>&1; then
	fail "rust (server, examples/db/schema.sql)"
	tail_logs "$WORK/server.log" "$WORK/data/server.log"
	finish
fi

# ---- 4. cargo test against it ----------------------------------------------
t0=$SECONDS
if run_logged "$WORK/cargo_test.log" env IDEM_TEST_DATABASE_URL="postgresql://payments_service@127.0.0.1:$port/$db" \
	cargo test --offline --manifest-path "$WORK/tree/clients/rust/Cargo.toml"; then
	if grep -q '^skipped' "$WORK/cargo_test.log"; then
		fail "rust/cargo-test (the database tests were skipped)"
	else
		pass "rust/cargo-test ($(awk '/^test result:/ { n += $4 } END { print n + 0 }' "$WORK/cargo_test.log") tests)"
	fi
else
	fail "rust/cargo-test"
	tail_logs "$WORK/cargo_test.log"
fi
note "cargo test: $((SECONDS - t0)) s"

# ---- 5. the conformance suite --------------------------------------------------
t0=$SECONDS
run_conformance rust "$WORK/tree" "$port" "$db" "[\"$SERVICE\"]"
note "conformance: $((SECONDS - t0)) s"
finish
