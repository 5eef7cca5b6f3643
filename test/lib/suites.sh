# shellcheck shell=bash
# test/lib/suites.sh: the suites of the test command, each a function
# suite_NAME that runs against the PostgreSQL at $PG_BIN (version
# $PG_MAJOR) with the extension built and installed, in the work directory
# $WORK (make_workdir), running make there as the postgres user through
# MAKE_PG.  Each prints a line per test file: "ok", "FAILED" or "skipped",
# naming the version (pass, fail, skip), and counts it in PASSED, FAILED,
# SKIPPED.  Sourced by test/run.sh, which runs regress, isolation, pgtap and
# tap itself and the slow suites through their make targets, and by
# test/suite.sh, which those targets call.

# The oldest version: in each other version's chroot,
# test/t/060_major_upgrade.pl moves a database from it to that version.
OLD_MAJOR=15

# Every line names its version: ok      pg18/regress/claim
pass() { PASSED=$((PASSED + 1)); printf '  ok      pg%s/%s\n' "$PG_MAJOR" "$1"; }
fail() { FAILED=$((FAILED + 1)); FAILURES="$FAILURES pg$PG_MAJOR/$1"; printf '  FAILED  pg%s/%s\n' "$PG_MAJOR" "$1"; }
skip() { SKIPPED=$((SKIPPED + 1)); printf '  skipped pg%s/%s\n' "$PG_MAJOR" "$1"; }
note() { printf '  (%s)\n' "$*"; }

# Stop every server started under $WORK (pg_ctl's, pg_regress's, the TAP
# nodes, test/deb.sh's) and remove it (KEEP_WORKDIR=1 keeps it).
remove_workdir()
{
	[ -n "$WORK" ] || return 0
	kill_servers_under "$WORK"
	if [ "${KEEP_WORKDIR:-}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
	WORK=""
}

# Count the "ok", "FAILED" and "skipped" lines of a log (a make target's, a
# version's run) into this run's; sets COUNTED_OK, COUNTED_FAILED and
# COUNTED_SKIPPED to its own.
count_lines()
{
	local log=$1
	COUNTED_OK=$(grep -c '^  ok      ' "$log")
	COUNTED_FAILED=$(grep -c '^  FAILED  ' "$log")
	COUNTED_SKIPPED=$(grep -c '^  skipped ' "$log")
	PASSED=$((PASSED + COUNTED_OK))
	FAILED=$((FAILED + COUNTED_FAILED))
	SKIPPED=$((SKIPPED + COUNTED_SKIPPED))
	FAILURES="$FAILURES$(sed -n 's/^  FAILED  \([^ ]*\).*/ \1/p' "$log" | tr -d '\n')"
}

# Run a command in its own session with its output in a log file, so that
# an interrupt reaches this script at once (wait returns) and cleanup can end
# the command's whole process group.  Returns the command's status.
run_logged()
{
	local log=$1 rc
	shift
	setsid "$@" >"$log" 2>&1 </dev/null &
	CHILD=$!
	wait "$CHILD"
	rc=$?
	CHILD=""
	return "$rc"
}

# Print the last lines of the files given that exist.
tail_logs()
{
	local f
	for f in "$@"; do
		[ -f "$f" ] || continue
		echo "--- $f (last 40 lines)"
		tail -n 40 "$f"
	done
}

# Count the test lines of a pg_regress-style log: "test NAME ... ok|FAILED"
# (15) or TAP's "ok 1 - NAME  12 ms" / "not ok 2 + NAME ..." (16 on).
count_regress()
{
	local suite=$1 log=$2 n=0 name result
	while read -r name result; do
		n=$((n + 1))
		if [ "$result" = ok ]; then pass "$suite/$name"; else fail "$suite/$name"; fi
	done < <(sed -nE -e 's/^(test +| +)?([A-Za-z0-9_-]+) +\.\.\. +(ok|FAILED|failed)\b.*/\2 \3/p' \
		-e 's/^ok +[0-9]+ +[-+] +([A-Za-z0-9_-]+) .*/\1 ok/p' \
		-e 's/^not ok +[0-9]+ +[-+] +([A-Za-z0-9_-]+) .*/\1 FAILED/p' "$log")
	[ "$n" -gt 0 ] || fail "$suite (did not run)"
}

# One pg_regress suite: make installcheck TEMP_INSTANCE=1 (private server,
# test/regress.conf), with the other suite's list and TAP_TESTS blanked out.
# $1: suite name, $2: the make variable to blank out so only this suite runs,
# $3: where its regression.diffs lands, relative to $WORK.
run_installcheck()
{
	local suite=$1 other=$2 diffs=$WORK/$3 rc
	[ "${PRELOAD:-1}" = 0 ] && suite=$suite-no-preload
	rm -f "$diffs"
	run_logged "$WORK/$suite.log" "${MAKE_PG[@]}" installcheck TEMP_INSTANCE=1 "$other=" TAP_TESTS= \
		PRELOAD="${PRELOAD:-1}"
	rc=$?
	count_regress "$suite" "$WORK/$suite.log"
	if [ -f "$diffs" ]; then
		cat "$diffs"
	elif [ "$rc" -ne 0 ]; then
		fail "$suite (pg_regress exited $rc)"
		tail_logs "$WORK/$suite.log" "$WORK"/tmp_check*/log/postmaster.log
	fi
}

# regress, isolation and pgtap run twice: against a server that preloads
# the library, and against one that does not (PRELOAD=0, the default
# configuration: lines "pgN/regress-no-preload/NAME").
suite_regress()
{
	say "regress (make installcheck: pg_regress, sql/)"
	run_installcheck regress ISOLATION regression.diffs
	say "regress without shared_preload_libraries (make installcheck PRELOAD=0)"
	PRELOAD=0 run_installcheck regress ISOLATION regression.diffs
}

suite_isolation()
{
	say "isolation (make installcheck: pg_isolation_regress, test/specs/)"
	run_installcheck isolation REGRESS test/output_iso/regression.diffs
	say "isolation without shared_preload_libraries (make installcheck PRELOAD=0)"
	PRELOAD=0 run_installcheck isolation REGRESS test/output_iso/regression.diffs
}

# pg_prove, one file at a time, each in a fresh database (with pgtap and
# idempotency created) on one server: files cannot depend on each other.
suite_pgtap()
{
	pgtap_run
	PRELOAD=0 pgtap_run
}

pgtap_run()
{
	local n=0 f name port suite=pgtap
	[ "${PRELOAD:-1}" = 0 ] && suite=pgtap-no-preload
	say "$suite (pg_prove, test/pgtap/)"
	if [ -n "$PGTAP_MISSING" ]; then
		skip "$suite (Debian ships no postgresql-$PG_MAJOR-pgtap here)"
		return
	fi
	port=$(free_port 55432)
	if ! start_server "$WORK/${suite}_data" "$port"; then
		fail "$suite (server did not start)"
		return
	fi
	for f in test/pgtap/*.sql; do
		[ -e "$f" ] || continue
		n=$((n + 1))
		name=$(basename "$f" .sql)
		if as_postgres psql -X -q -h "$WORK" -p "$port" -d postgres -v ON_ERROR_STOP=1 \
			-c "CREATE DATABASE \"tap_$name\"" >"$WORK/${suite}_$name.log" 2>&1 &&
			as_postgres psql -X -q -h "$WORK" -p "$port" -d "tap_$name" -v ON_ERROR_STOP=1 \
				-c "CREATE EXTENSION pgtap" -c "CREATE EXTENSION idempotency" >>"$WORK/${suite}_$name.log" 2>&1 &&
			run_logged "$WORK/${suite}_$name.run" runuser -u postgres -- env -C "$WORK" \
				PATH="$PG_BIN:$PATH" pg_prove -h "$WORK" -p "$port" -d "tap_$name" "$f"; then
			pass "$suite/$name"
		else
			fail "$suite/$name"
			cat "$WORK/${suite}_$name.log" "$WORK/${suite}_$name.run" 2>/dev/null
		fi
	done
	[ "$n" -gt 0 ] || note "no test/pgtap/*.sql: suite skipped"
	stop_server "$WORK/${suite}_data"
}

# The documents as a user runs them (test/docs.sh): every sql block of
# README.md and docs/*.md in order, a database per document, on a server
# with shared_preload_libraries = 'idempotency' and on one without it (the
# configuration the README calls optional); one line per document and
# server, "docs/preload/README" or "docs/no-preload/README".
suite_docs()
{
	local config port data line name rest
	say "docs (test/docs.sh: the sql blocks of README.md and docs/*.md, in order)"
	for config in preload no-preload; do
		port=$(free_port 55532)
		data=$WORK/docs_$config
		if ! PRELOAD=$([ "$config" = no-preload ] && echo 0 || echo 1) start_server "$data" "$port"; then
			fail "docs/$config (server did not start)"
			continue
		fi
		run_logged "$WORK/docs_$config.log" runuser -u postgres -- env -C "$WORK" PATH="$PG_BIN:$PATH" \
			TMPDIR="$WORK/tmp" PGHOST="$WORK" PGPORT="$port" bash test/docs.sh "--$config"
		while IFS= read -r line; do
			case $line in
			"ok      "*) rest=${line#ok      }; rest=${rest#docs/}; name=${rest%% *}; pass "docs/$config/$name ${rest#"$name" }" ;;
			"FAILED  "*) rest=${line#FAILED  }; rest=${rest#docs/}; name=${rest%% *}; fail "docs/$config/$name ${rest#"$name" }" ;;
			*) printf '%s\n' "$line" ;;
			esac
		done <"$WORK/docs_$config.log"
		grep -qE '^(ok|FAILED)  ' "$WORK/docs_$config.log" || fail "docs/$config (no document ran)"
		stop_server "$data"
	done
}

# The SQL edition (edition/, docs/managed.md): make edition, then on a
# private copy of this PostgreSQL without the C build and with pg_tle built
# into it (test/edition/prepare.sh, as root; ../shared/pg_tle/build.sh)
# test/edition/install.sh (pg_tle as on RDS, the plain script as on Cloud
# SQL/Azure/Neon, expiry through pg_cron where Debian has it: one server)
# and test/edition/regress.sh (sql/ and test/specs/ against the edition, on
# a server of its own without preload; installed as the plain script, then
# through pg_tle); then test/edition/hash_corpus.sql
# through pg_regress on a server of the installed PostgreSQL, in a
# database with the C build in public and the edition's plain script in
# schema ed, compared with test/edition/hash_corpus.out; migrate.sh,
# compare.sh (on migrate.sh's server) and migrate-tle.sh.  Lines
# "pgN/edition/NAME".
suite_edition()
{
	local bin out port dir=$WORK/edition line why="" build part
	say "edition (the SQL edition: make edition; test/edition/names.py, install.sh, regress.sh, hash_corpus.sql, migrate.sh, compare.sh, migrate-tle.sh, pgtap.sh, monitoring.sh)"
	if ! run_logged "$WORK/edition_build.log" "${MAKE_PG[@]}" edition; then
		fail "edition/build (make edition)"
		cat "$WORK/edition_build.log"
		return
	fi
	# every name in its function bodies pinned to pg_catalog
	if python3 "$WORK/test/edition/names.py" "$WORK"/edition/dist/idempotency--*.sql >"$WORK/edition_names.log" 2>&1; then
		pass "edition/names"
	else
		fail "edition/names (test/edition/names.py: names the edition's schema could capture)"
		cat "$WORK/edition_names.log"
	fi
	build=$(cd .. && pwd)/shared/pg_tle/build.sh
	if [ ! -f "$build" ]; then
		fail "edition/prepare (no ../shared/pg_tle/build.sh beside the repository to build pg_tle with)"
		return
	fi
	if ! run_logged "$WORK/edition_prepare.log" env PGTLE_BUILD="$build" \
		bash "$WORK/test/edition/prepare.sh" "$PG_BIN" "$dir/pg"; then
		fail "edition/prepare (a copy of PostgreSQL $PG_MAJOR with pg_tle, test/edition/prepare.sh)"
		tail_logs "$WORK/edition_prepare.log"
		return
	fi
	bin=$(tail -n 1 "$WORK/edition_prepare.log")
	edition_lines()
	{
		while IFS= read -r line; do
			case $line in
			"ok "*) pass "edition/${line#ok }"; why="" ;;
			"not ok "*) fail "edition/${line#not ok }"; why=1 ;;
			"skip "*) skip "edition/${line#skip }"; why="" ;;
			"# not run on the edition: "*) note "${line#\# }" ;;
			"# regression.diffs of "*) why=1; printf '          %s\n' "${line#\# }" ;;
			"# "*) [ -n "$why" ] && printf '          %s\n' "${line#\# }" ;;
			*) [ -n "$line" ] && printf '          %s\n' "$line" ;;
			esac
		done <"$1"
	}
	edition_part_done()
	{
		local part=$1 out=$2 script=${3:-test/edition/$1.sh}
		edition_lines "$WORK/edition_$part.log"
		grep -q '^\(ok\|not ok\) ' "$WORK/edition_$part.log" ||
			fail "edition/$part ($script exited $out and ran nothing)"
		[ "$out" -ne 0 ] && ! grep -q '^not ok ' "$WORK/edition_$part.log" &&
			fail "edition/$part ($script exited $out)"
	}
	# install.sh waits most of its time for pg_cron: it runs beside the
	# rest, on a server and port of its own
	as_postgres mkdir -p "$dir/install" "$dir/regress"
	port=$(free_port 55540)
	setsid runuser -u postgres -- env -C "$WORK" TMPDIR="$WORK/tmp" \
		bash "$WORK/test/edition/install.sh" "$bin" "$dir/install" "$port" >"$WORK/edition_install.log" 2>&1 </dev/null &
	local install_pid=$!
	# monitoring.sh waits mostly for the exporter: beside the rest too, on
	# a server and an exporter port of its own
	as_postgres mkdir -p "$dir/monitoring"
	port=$(free_port 55590)
	setsid runuser -u postgres -- env -C "$WORK" TMPDIR="$WORK/tmp" \
		bash "$WORK/test/edition/monitoring.sh" "$bin" "$dir/monitoring" "$port" "$(free_port 9190)" \
		>"$WORK/edition_monitoring.log" 2>&1 </dev/null &
	local monitoring_pid=$!
	port=$(free_port 55560)
	run_logged "$WORK/edition_regress.log" runuser -u postgres -- env -C "$WORK" TMPDIR="$WORK/tmp" \
		bash "$WORK/test/edition/regress.sh" "$bin" "$dir/regress" "$port"
	out=$?
	edition_part_done regress "$out"
	# the same files against the pg_tle install (CREATE EXTENSION through
	# pg_tle in each database), on a server that preloads pg_tle
	port=$(free_port 55565)
	as_postgres mkdir -p "$dir/regress-tle"
	run_logged "$WORK/edition_regress-tle.log" runuser -u postgres -- env -C "$WORK" TMPDIR="$WORK/tmp" \
		bash "$WORK/test/edition/regress.sh" "$bin" "$dir/regress-tle" "$port" tle
	edition_part_done regress-tle $? "test/edition/regress.sh tle"
	edition_hash_corpus
	# moving between the editions: the C build's server ($PG_BIN)
	port=$(free_port 55550)
	as_postgres mkdir -p "$dir/migrate"
	run_logged "$WORK/edition_migrate.log" runuser -u postgres -- env -C "$WORK" TMPDIR="$WORK/tmp" \
		bash "$WORK/test/edition/migrate.sh" "$PG_BIN" "$dir/migrate" "$port"
	out=$?
	edition_lines "$WORK/edition_migrate.log"
	grep -q '^\(ok\|not ok\) ' "$WORK/edition_migrate.log" ||
		fail "edition/migrate (test/edition/migrate.sh exited $out and ran nothing)"
	# the edition's objects against the C build's (catalogs, roles,
	# idem_claim's answers), on migrate.sh's server ($PG_BIN): no initdb
	port=$(free_port 55555)
	run_logged "$WORK/edition_compare.log" runuser -u postgres -- env -C "$WORK" TMPDIR="$WORK/tmp" \
		bash "$WORK/test/edition/compare.sh" "$PG_BIN" "$dir/migrate" "$port"
	edition_part_done compare $?
	# the pg_tle edition moved: to a database beside it and on another
	# pg_tle server (the prepared copy, $bin), to the C build ($PG_BIN) and
	# back; one server at a time, on ports port..port+2, sockets in its dir
	port=$(free_port 55570)
	as_postgres mkdir -p "$dir/migrate-tle"
	run_logged "$WORK/edition_migrate-tle.log" runuser -u postgres -- env -C "$WORK" TMPDIR="$WORK/tmp" \
		bash "$WORK/test/edition/migrate-tle.sh" "$PG_BIN" "$bin" "$dir/migrate-tle" "$port"
	out=$?
	edition_part_done migrate-tle "$out"
	# the C build's pgTAP files against both installs (test/edition/pgtap.sh)
	port=$(free_port 55580)
	as_postgres mkdir -p "$dir/pgtap"
	run_logged "$WORK/edition_pgtap.log" runuser -u postgres -- env -C "$WORK" TMPDIR="$WORK/tmp" \
		bash "$WORK/test/edition/pgtap.sh" "$bin" "$dir/pgtap" "$port"
	out=$?
	if grep -q '^skip ' "$WORK/edition_pgtap.log"; then
		edition_lines "$WORK/edition_pgtap.log"
	else
		edition_part_done pgtap "$out"
	fi
	wait "$monitoring_pid"
	edition_part_done monitoring $?
	wait "$install_pid"
	edition_part_done install $?
}

# test/edition/hash_corpus.sql: the C build's idem_request_hash (public)
# against the edition's (schema ed), in one database, through pg_regress.
edition_hash_corpus()
{
	local port data=$WORK/edition/hash_data dir=$WORK/edition/hash out
	if [ ! -f test/edition/hash_corpus.sql ] || [ ! -f test/edition/hash_corpus.out ]; then
		fail "edition/hash_corpus (test/edition/hash_corpus.sql or .out is missing)"
		return
	fi
	port=$(free_port 55545)
	if ! PRELOAD=0 start_server "$data" "$port"; then
		fail "edition/hash_corpus (server did not start)"
		return
	fi
	as_postgres mkdir -p "$dir/sql" "$dir/expected"
	as_postgres cp "$WORK/test/edition/hash_corpus.sql" "$dir/sql/"
	as_postgres cp "$WORK/test/edition/hash_corpus.out" "$dir/expected/"
	if out=$(as_postgres psql -X -q -h "$WORK" -p "$port" -d postgres -v ON_ERROR_STOP=1 \
		-c "CREATE DATABASE edition_hash" 2>&1) &&
		out=$(as_postgres psql -X -q -h "$WORK" -p "$port" -d edition_hash -v ON_ERROR_STOP=1 \
			-c "CREATE EXTENSION idempotency" -c "CREATE SCHEMA ed" -c "SET search_path = ed" \
			-f "$WORK/edition/dist/idempotency-sql--$(sed -nE "s/^default_version = '([^']+)'/\1/p" idempotency.control).sql" 2>&1); then
		run_logged "$WORK/edition_hash.log" runuser -u postgres -- env -C "$dir" PATH="$PG_BIN:$PATH" \
			"$PGXS_DIR/src/test/regress/pg_regress" --bindir="$PG_BIN" --host="$WORK" --port="$port" \
			--inputdir=. --outputdir=. --use-existing --dbname=edition_hash hash_corpus
		count_regress edition "$WORK/edition_hash.log"
		cat "$dir/regression.diffs" 2>/dev/null
	else
		fail "edition/hash_corpus (the C build in public, the plain script in schema ed)"
		printf '%s\n' "$out"
	fi
	stop_server "$data"
}

# make prove_installcheck over test/t/*.pl, two files at a time (prove -j2:
# PostgreSQL::Test::Cluster reserves each server's port under a lock, and
# every file's servers have directories of their own), the slowest first so
# that the two lanes end together.  One line per file, from prove's own
# (--timer: its seconds); its servers' logs stay in tap/tmp_check.
TAP_SLOWEST="012_worker_databases 030_replication 014_worker_load 020_crash 011_worker_signals"
suite_tap()
{
	local f name files=() rest=() log=$WORK/tap.log line ms res failed=""
	say "tap (make prove_installcheck: prove -j2, test/t/)"
	as_postgres mkdir -p "$WORK/tap"
	for name in $TAP_SLOWEST; do
		[ -e "test/t/$name.pl" ] && files+=("test/t/$name.pl")
	done
	for f in test/t/*.pl; do
		[ -e "$f" ] || continue
		name=$(basename "$f" .pl)
		if [ "$name" = 060_major_upgrade ] && [ "$PG_MAJOR" = "$OLD_MAJOR" ]; then
			note "$name: $OLD_MAJOR is the oldest version, the one the others' runs upgrade from"
			continue
		fi
		case " $TAP_SLOWEST " in *" $name "*) ;; *) rest+=("$f") ;; esac
	done
	files+=("${rest[@]}")
	if [ "${#files[@]}" -eq 0 ]; then
		note "no test/t/*.pl: suite skipped"
		return
	fi
	run_logged "$log" "${MAKE_PG[@]}" prove_installcheck PROVE_TESTS="${files[*]}" PROVE_FLAGS="-j2 --timer"
	for f in "${files[@]}"; do
		name=$(basename "$f" .pl)
		# "[hh:mm:ss] test/t/NAME.pl ....... ok    12345 ms ( ... )", or
		# "... skipped: WHY", or a failure ("Dubious", "Failed 2/9 subtests")
		line=$(grep -E "^(\[[0-9:]+\] )?$f \.+ " "$log" | tail -n 1)
		res=${line#*"$f "}
		res=$(printf '%s' "$res" | sed -E 's/^\.+ //')
		case $res in
		ok*)
			ms=$(printf '%s' "$res" | sed -nE 's/^ok +([0-9]+) ms.*/\1/p')
			pass "tap/$name (${ms:+$((ms / 1000)) s})"
			;;
		skipped:*) skip "tap/$name (${res#skipped: })" ;;
		*)
			fail "tap/$name"
			failed=1
			tail_logs "$WORK/tmp_check/log/regress_log_$name" "$WORK"/tmp_check/log/"$name"_*.log
			;;
		esac
	done
	if ! grep -qE '^Result: ' "$log"; then
		fail "tap (prove did not finish)"
		cat "$log"
	elif [ -n "$failed" ]; then
		# prove's own account of each failure
		sed -n '/^Test Summary Report/,$p' "$log"
	fi
	[ -d "$WORK/tmp_check" ] && mv "$WORK/tmp_check" "$WORK/tap/tmp_check"
}

# examples/http needs Node.js with the pg and express modules.  Every machine
# (CI too) reaches Debian's mirrors and the npm registry: node_modules
# already in the tree, else npm ci (online), else npm ci --offline (npm's
# cache), else Debian's node-pg and node-express.  Debian's nodejs is
# installed only when there is no node at all; with another Node.js (say
# NodeSource's, which Debian's node-* packages cannot be installed beside)
# their .debs are unpacked into the work directory and found through
# NODE_PATH.  Sets HTTP_MODULES to where the modules came from.
http_modules()
{
	local dir=$WORK/examples/http deb=$WORK/debian-node pkgs f
	unset NODE_PATH
	if ! command -v node >/dev/null; then
		apt_install nodejs npm || return 1
	fi
	if [ -d "$dir/node_modules/pg" ] && [ -d "$dir/node_modules/express" ]; then
		HTTP_MODULES="examples/http/node_modules"
		return 0
	fi
	if command -v npm >/dev/null; then
		if (cd "$dir" && npm ci --no-audit --no-fund) >"$WORK/npm.log" 2>&1; then
			HTTP_MODULES="npm ci"
			return 0
		fi
		if (cd "$dir" && npm ci --offline --no-audit --no-fund) >>"$WORK/npm.log" 2>&1; then
			HTTP_MODULES="npm ci --offline (npm ci: $(sed -n 's/^npm \(ERR!\|error\) code //p' "$WORK/npm.log" | head -n 1))"
			return 0
		fi
		note "npm ci failed: $(sed -n 's/^npm \(ERR!\|error\) code //p' "$WORK/npm.log" | tr '\n' ' ')"
	fi
	rm -rf "$dir/node_modules"
	if debian_node && apt_install node-pg node-express >>"$WORK/npm.log" 2>&1; then
		NODE_PATH=/usr/share/nodejs:/usr/lib/nodejs:/usr/lib/$(gcc -print-multiarch)/nodejs
		HTTP_MODULES="Debian's node-pg and node-express"
	else
		# the closure of their node-* and libjs-* dependencies, unpacked
		[ -n "$(apt-cache policy node-pg 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v none)" ] ||
			apt-get update -qq >>"$WORK/npm.log" 2>&1
		pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
			--no-replaces --no-enhances node-pg node-express 2>/dev/null | grep -E '^(node|libjs)-' | sort -u)
		[ -n "$pkgs" ] || return 1
		mkdir -p "$deb/debs" && chown _apt "$deb/debs" 2>/dev/null
		# shellcheck disable=SC2086
		(cd "$deb/debs" && apt-get download -q $pkgs) >>"$WORK/npm.log" 2>&1 || return 1
		for f in "$deb"/debs/*.deb; do dpkg-deb -x "$f" "$deb/root" || return 1; done
		NODE_PATH=$deb/root/usr/share/nodejs:$deb/root/usr/lib/nodejs:$deb/root/usr/lib/$(gcc -print-multiarch)/nodejs
		HTTP_MODULES="Debian's node-pg and node-express, unpacked for node $(node --version)"
	fi
	export NODE_PATH
}

# True when the node on PATH is Debian's nodejs package (a version the apt
# sources offer), beside which Debian's node-* packages install.
debian_node()
{
	local bin ver offered
	bin=$(readlink -f "$(command -v node)") || return 1
	[ "$(dpkg -S "$bin" 2>/dev/null | cut -d: -f1)" = nodejs ] || return 1
	ver=$(dpkg-query -W -f='${Version}' nodejs 2>/dev/null) || return 1
	# not "| grep -q": under pipefail, apt-cache's SIGPIPE would fail it
	offered=$(apt-cache madison nodejs 2>/dev/null)
	case $offered in *"| $ver |"*) return 0 ;; esac
	return 1
}

# Builds examples/go with Debian's Go, Gin and lib/pq only: GOPATH mode over
# /usr/share/gocode and the Go library (clients/go, go_library_gopath), no
# module downloads.
build_go_example()
{
	apt_install golang-go golang-github-gin-gonic-gin-dev golang-github-lib-pq-dev || return 1
	go_library_gopath || return 1
	mkdir -p "$WORK/bin"
	go_offline "$WORK/examples/go" go build -o "$WORK/bin/payments-go" .
}

# The Go library's import path (clients/go/go.mod's module), and a GOPATH in
# which it is found: $WORK/gopath/src/<import path> links to clients/go.
GO_LIBRARY=github.com/idempotency/idempotency/clients/go
go_library_gopath()
{
	mkdir -p "$WORK/gopath/src/${GO_LIBRARY%/*}" "$WORK/gocache" &&
		ln -sfn "$WORK/clients/go" "$WORK/gopath/src/$GO_LIBRARY"
}

# Runs a command in directory $1 with the go tool in GOPATH mode, offline:
# that GOPATH, then Debian's (http_go_library spells it out: run_logged
# cannot run a function).
go_offline()
{
	local dir=$1
	shift
	env -C "$dir" GO111MODULE=off GOPATH="$WORK/gopath:/usr/share/gocode" GOFLAGS= GOPROXY=off \
		GOCACHE="$WORK/gocache" "$@"
}

# The Go library's own tests (clients/go: the key functions, the net/http
# middleware through httptest, the Gin adapter), go test against a database
# of their own (examples_go_lib, examples/db/schema.sql) on the server at
# port $1, after gofmt and go vet.  Run after build_go_example.
http_go_library()
{
	local port=$1 log=$WORK/http_go_lib.log n
	if ! http_database examples_go_lib "$port" "$log"; then
		fail "http/go/lib (examples/db/schema.sql)"
		cat "$log"
		return
	fi
	if [ -n "$(gofmt -l "$WORK/clients/go" 2>&1)" ]; then
		fail "http/go/lib (gofmt -l: $(gofmt -l "$WORK/clients/go" 2>&1 | tr '\n' ' '))"
		return
	fi
	if run_logged "$log" env -C "$WORK/gopath/src/$GO_LIBRARY" GO111MODULE=off \
		GOPATH="$WORK/gopath:/usr/share/gocode" GOFLAGS= GOPROXY=off GOCACHE="$WORK/gocache" \
		PGHOST=127.0.0.1 PGPORT="$port" PGUSER=payments_service PGDATABASE=examples_go_lib PGSSLMODE=disable \
		sh -c 'go vet . ./ginidem && go test -count=1 -v . ./ginidem' &&
		! grep -q '^--- SKIP' "$log"; then
		n=$(grep -c '^--- PASS' "$log")
		pass "http/go/lib ($n tests)"
	else
		fail "http/go/lib"
		tail -n 60 "$log"
	fi
}

# Builds the Java library clients/java into $WORK/java/idempotency-0.4.0.jar
# (javac -Werror, then jar with its manifest) and compiles its JUnit 5 tests
# (Debian's junit5) into $WORK/java/test-classes.  The jar's classes but
# IdempotencyServletFilter's are compiled without the servlet API on the
# class path (the jar works without it); that filter after them, against
# Debian's jakarta.servlet 5.0 API (libjakarta-servlet-api-java); its tests
# against embedded Tomcat (libtomcat10-embed-java).
build_java_client()
{
	local dir=$WORK/java
	rm -rf "$dir" && mkdir -p "$dir/classes" "$dir/test-classes" || return 1
	# shellcheck disable=SC2046 # the file names have no spaces
	javac -Xlint:all,-serial -Werror -d "$dir/classes" -cp /usr/share/java/postgresql.jar \
		$(find "$WORK/clients/java/src" -name '*.java' ! -name 'IdempotencyServlet*') &&
		javac -Xlint:all,-serial -Werror -d "$dir/classes" \
			-cp "$dir/classes:/usr/share/java/postgresql.jar:/usr/share/java/jakarta-servlet-api.jar" \
			$(find "$WORK/clients/java/src" -name 'IdempotencyServlet*.java') &&
		jar --create --file "$dir/idempotency-0.4.0.jar" --manifest "$WORK/clients/java/MANIFEST.MF" \
			-C "$dir/classes" . &&
		javac -Xlint:all,-serial -Werror -d "$dir/test-classes" \
			-cp "$dir/idempotency-0.4.0.jar:/usr/share/java/postgresql.jar:/usr/share/java/junit-jupiter-api.jar:/usr/share/java/apiguardian-api.jar:/usr/share/java/tomcat10-embed-core.jar" \
			$(find "$WORK/clients/java/test" -name '*.java')
}

# The Debian packages the Java library, its tests and examples/java need.
JAVA_PACKAGES="default-jdk-headless libpostgresql-jdbc-java junit5 libjakarta-servlet-api-java libtomcat10-embed-java libjakarta-annotation-api-java"

# Builds examples/java with javac (Debian's JDK and PostgreSQL JDBC driver)
# against the library's jar (build_java_client) into $WORK/java-classes.
build_java_example()
{
	# shellcheck disable=SC2086 # a list of names
	apt_install $JAVA_PACKAGES || return 1
	build_java_client || return 1
	rm -rf "$WORK/java-classes"
	# shellcheck disable=SC2046 # the file names have no spaces
	javac -Xlint:all,-serial -Werror -d "$WORK/java-classes" \
		-cp "$WORK/java/idempotency-0.4.0.jar:/usr/share/java/postgresql.jar" \
		$(find "$WORK/examples/java/src" -name '*.java')
}

# The Java library's JUnit 5 tests (the jar on the class path) against
# database $2 on port $1, as the service role: IdempotencyFilter on the
# JDK's HTTP server, IdempotencyServletFilter in embedded Tomcat (which
# needs the jakarta.annotation API), and the jar in a JVM without the
# servlet API.
test_java_client()
{
	if run_logged "$WORK/http_java_junit.log" env PGHOST=127.0.0.1 PGPORT="$1" \
		PGUSER=payments_service PGDATABASE="$2" \
		java -jar /usr/share/java/junit-platform-console-standalone.jar --disable-banner \
		--disable-ansi-colors --details=tree --fail-if-no-tests \
		-cp "$WORK/java/idempotency-0.4.0.jar:$WORK/java/test-classes:/usr/share/java/postgresql.jar:/usr/share/java/tomcat10-embed-core.jar:/usr/share/java/jakarta-annotation-api.jar" \
		--scan-classpath "$WORK/java/test-classes"; then
		pass "http/java/junit ($(grep -Eo '[0-9]+ tests successful' "$WORK/http_java_junit.log"), clients/java: the JDK's HTTP server and Tomcat)"
	else
		fail "http/java/junit"
		cat "$WORK/http_java_junit.log"
	fi
}

# The three example services (examples/http Node.js, examples/go,
# examples/java) against the one black-box conformance suite
# (examples/conformance/*.test.js, node --test, run_conformance): each
# service in a database of its own, set up by examples/db/schema.sql and
# used as a login role with only the grants that script gives; each
# service's library's own tests before it (http_node_library,
# http_go_library, test_java_client).  The three run at once, one lane
# each (http_lane), their lines shown after, in order: most of their time
# is spent waiting (leases, held answers, a service's restart).  Beside
# them, the Node.js service against the SQL edition (http_edition_start).
suite_http()
{
	local port svc out pids=()
	say "http (examples/: Node.js, Go and Java services and their libraries x examples/conformance, node --test, at once; Node.js again on the SQL edition, test/edition/http.sh)"
	port=$(free_port 55532)
	if ! http_modules; then
		fail "http (could not get Node.js and its modules)"
		tail_logs "$WORK/npm.log"
		return
	fi
	note "node $(node --version), modules: $HTTP_MODULES"
	# the Go and Java toolchains (and TypeScript) now, before the lanes use them
	# shellcheck disable=SC2086 # a list of names
	if ! apt_install golang-go golang-github-gin-gonic-gin-dev golang-github-lib-pq-dev \
		$JAVA_PACKAGES node-typescript >"$WORK/http_apt.log" 2>&1; then
		fail "http (could not install Go, Java and TypeScript)"
		cat "$WORK/http_apt.log"
		return
	fi
	# max_connections: the three lanes at once, each up to two instances of
	# its service (card.test.js) with a pool of 20 and 2 heartbeat
	# connections each (132), beside the libraries' tests and psql; at the
	# default 100 (97 for a role without superuser) a service's connection
	# is refused (53300, a 500) and its card payment never reaches the card
	# network
	if ! start_server "$WORK/http_data" "$port" "max_connections = 200" ||
		! as_postgres psql -X -q -h "$WORK" -p "$port" -d postgres -v ON_ERROR_STOP=1 \
			-c "CREATE ROLE payments_service LOGIN"; then
		fail "http (server did not start)"
		stop_server "$WORK/http_data"
		return
	fi
	http_edition_start
	for svc in node go java; do
		http_lane "$svc" "$port" >"$WORK/http_lane_$svc.out" 2>"$WORK/http_lane_$svc.err" &
		pids+=($!)
	done
	wait "${pids[@]}"
	for svc in node go java; do
		out=$WORK/http_lane_$svc.out
		cat "$out"
		count_lines "$out"
		# what a check prints goes to its log: anything here is the
		# lane's own failure (a command missing, a function undefined)
		if [ -s "$WORK/http_lane_$svc.err" ]; then
			fail "http/$svc (the lane itself failed)"
			cat "$WORK/http_lane_$svc.err"
		fi
	done
	stop_server "$WORK/http_data"
	http_edition_finish
}

# Database $1 on the server at port $2, set up by examples/db/schema.sql for
# the login role payments_service; psql's output in log $3.
http_database()
{
	as_postgres psql -X -q -h "$WORK" -p "$2" -d postgres -v ON_ERROR_STOP=1 \
		-c "CREATE DATABASE $1" >"$3" 2>&1 &&
		as_postgres psql -X -q -h "$WORK" -p "$2" -d "$1" -v service_role=payments_service \
			-f examples/db/schema.sql >>"$3" 2>&1
}

# One service's lane of suite_http, in a subshell of its own: what it
# prints, suite_http counts.
http_lane()
{
	local svc=$1 port=$2 db=examples_$1 cmd t0=$SECONDS
	case $svc in
	node)
		http_node_library "$port"
		cmd='["node", "'"$WORK"'/examples/http/server.js"]'
		;;
	go)
		if ! build_go_example >"$WORK/build_go.log" 2>&1; then
			fail "http/go (build)"
			tail_logs "$WORK/build_go.log"
			return
		fi
		http_go_library "$port"
		cmd='["'"$WORK"'/bin/payments-go"]'
		;;
	java)
		if ! build_java_example >"$WORK/build_java.log" 2>&1; then
			fail "http/java (build)"
			tail_logs "$WORK/build_java.log"
			return
		fi
		cmd='["java", "-Xss512k", "-cp", "'"$WORK"'/java-classes:'"$WORK"'/java/idempotency-0.4.0.jar:/usr/share/java/postgresql.jar", "payments.PaymentsServer"]'
		;;
	esac
	if ! http_database "$db" "$port" "$WORK/http_$db.log"; then
		fail "http/$svc (examples/db/schema.sql)"
		cat "$WORK/http_$db.log"
		return
	fi
	[ "$svc" != java ] || test_java_client "$port" "$db"
	run_conformance "http/$svc" "$WORK" "$port" "$db" "$cmd"
	note "http/$svc: $((SECONDS - t0)) s"
}

# The Node.js library clients/node (npm package pg-idempotency): its node
# --test tests against database client_node (examples/db/schema.sql, the
# service role) on the server at port $1, with the modules examples/http
# got (node_modules, or Debian's through NODE_PATH).  Lines http/node/lib
# (client.test.js, middleware.test.js) and http/node/pack (pack.test.js:
# npm pack, the tarball installed offline into a fresh app).
http_node_library()
{
	local port=$1 log=$WORK/http_node_lib t0
	if ! http_database client_node "$port" "$log.setup"; then
		fail "http/node/lib (examples/db/schema.sql)"
		cat "$log.setup"
		return
	fi
	set -- env -C "$WORK/clients/node" PGHOST=127.0.0.1 PGPORT="$port" PGUSER=payments_service \
		PGDATABASE=client_node PGSSLMODE=disable TMPDIR="$WORK/tmp" \
		NODE_PATH="${NODE_PATH:+$NODE_PATH:}$WORK/examples/http/node_modules" node --test
	t0=$SECONDS
	if run_logged "$log.log" "$@" test/client.test.js test/middleware.test.js; then
		pass "http/node/lib ($(sed -n 's/^# pass //p' "$log.log") tests, $((SECONDS - t0)) s)"
	else
		fail "http/node/lib"
		show_tap "$log.log"
	fi
	# the TypeScript types: test/types.check.js (Debian's node-typescript)
	if run_logged "$log.types.log" env -C "$WORK/clients/node" node test/types.check.js; then
		pass "http/node/types (index.d.ts: $(grep -c '^ok: ' "$log.types.log") checks, $(sed -n 's/.*(TypeScript \([^,]*\),.*/TypeScript \1/p' "$log.types.log"))"
	else
		fail "http/node/types"
		cat "$log.types.log"
	fi
	t0=$SECONDS
	if run_logged "$log.pack.log" "$@" test/pack.test.js; then
		pass "http/node/pack (npm pack, installed into a fresh app, $((SECONDS - t0)) s)"
	else
		fail "http/node/pack"
		show_tap "$log.pack.log"
	fi
}

# The Node.js service once more, against the SQL edition: test/edition/http.sh
# on a copy of this PostgreSQL without the C build (test/edition/prepare.sh),
# the plain script installed by the database's owner (no superuser), as on
# Cloud SQL, on a server of its own.  It waits most of its time (leases,
# held answers), so it runs beside the C build's services:
# http_edition_start before them, http_edition_finish after.  Lines
# "pgN/http/edition/NAME".
http_edition_start()
{
	local build bin port
	HTTP_EDITION_PID="" HTTP_EDITION_T0=$SECONDS
	build=$(cd .. && pwd)/shared/pg_tle/build.sh
	as_postgres mkdir -p "$WORK/http_edition/run"
	if ! run_logged "$WORK/http_edition_build.log" "${MAKE_PG[@]}" edition ||
		! run_logged "$WORK/http_edition_prepare.log" env PGTLE_BUILD="$build" \
			bash "$WORK/test/edition/prepare.sh" "$PG_BIN" "$WORK/http_edition/pg"; then
		fail "http/edition (make edition; test/edition/prepare.sh)"
		tail_logs "$WORK/http_edition_build.log" "$WORK/http_edition_prepare.log"
		return
	fi
	bin=$(tail -n 1 "$WORK/http_edition_prepare.log")
	port=$(free_port 55536)
	setsid runuser -u postgres -- env -C "$WORK" TMPDIR="$WORK/tmp" ${NODE_PATH:+NODE_PATH="$NODE_PATH"} \
		bash "$WORK/test/edition/http.sh" "$bin" "$WORK/http_edition/run" "$port" \
		>"$WORK/http_edition.log" 2>&1 </dev/null &
	HTTP_EDITION_PID=$!
	note "http/edition: started, $((SECONDS - HTTP_EDITION_T0)) s to make edition and prepare the copy"
}

http_edition_finish()
{
	local line out t0=$SECONDS
	[ -n "$HTTP_EDITION_PID" ] || return 0
	wait "$HTTP_EDITION_PID"
	out=$?
	while IFS= read -r line; do
		case $line in
		"ok "*) pass "http/edition/${line#ok }" ;;
		"not ok "*) fail "http/edition/${line#not ok }" ;;
		*) printf '          %s\n' "$line" ;;
		esac
	done <"$WORK/http_edition.log"
	if ! grep -q '^ok setup' "$WORK/http_edition.log" && ! grep -q '^not ok ' "$WORK/http_edition.log"; then
		fail "http/edition (test/edition/http.sh exited $out and ran nothing)"
	elif [ "$out" -ne 0 ] && ! grep -q '^not ok ' "$WORK/http_edition.log"; then
		fail "http/edition (test/edition/http.sh exited $out)"
	fi
	note "http/edition: waited $((SECONDS - t0)) s for it after the C build's services ($((SECONDS - HTTP_EDITION_T0)) s in all)"
}

suite_package()
{
	say "package (test/meta.py, test/deb.sh)"
	if python3 test/meta.py >"$WORK/meta.log" 2>&1; then
		pass "package/pgxn ($(cat "$WORK/meta.log"))"
	else
		fail "package/pgxn (test/meta.py)"
		cat "$WORK/meta.log"
	fi
	# the autopkgtest (make installcheck twice more: about 2.5 minutes) on
	# 17 only by default, the version off the run's longest path (15, then
	# 19); on another by name: IDEM_AUTOPKGTEST=1 PG_MAJOR=15 bash test/run.sh package
	local autopkgtest=0
	[ "$PG_MAJOR" = 17 ] && autopkgtest=1
	if IDEM_AUTOPKGTEST=${IDEM_AUTOPKGTEST:-$autopkgtest} run_logged "$WORK/package.log" bash test/deb.sh; then
		pass "package/postgresql-$PG_MAJOR-idempotency ($(grep -m1 '^built' "$WORK/package.log"))"
		if grep -q '^debian/watch: uscan found' "$WORK/package.log"; then
			pass "package/watch ($(sed -n 's/^debian\/watch: //p' "$WORK/package.log"))"
		else
			fail "package/watch (no uscan: devscripts is not installed)"
		fi
		if grep -q '^autopkgtest passed' "$WORK/package.log"; then
			pass "package/autopkgtest ($(grep -m1 '^autopkgtest passed' "$WORK/package.log"))"
		elif [ "${IDEM_AUTOPKGTEST:-$autopkgtest}" = 1 ]; then
			fail "package/autopkgtest (test/deb.sh did not report it)"
		fi
	else
		fail "package/postgresql-$PG_MAJOR-idempotency"
		cat "$WORK/package.log"
	fi
}

# bench/run.sh --check: the benchmark's contention mode, short, on the
# extension installed above: 8 clients race a few keys through every variant
# (the extension's patterns, the PL/pgSQL reference, Redis, ON CONFLICT) and
# the driver checks exactly-once after each run.  Correctness only: the
# timings it prints are not asserted.
suite_bench()
{
	say "bench (bench/run.sh --check: exactly-once under contention)"
	if run_logged "$WORK/bench.log" bash bench/run.sh --check --no-build; then
		pass "bench/contention ($(grep -c ': held:' "$WORK/bench.log") runs held)"
	else
		fail "bench/contention"
		cat "$WORK/bench.log"
	fi
}

# Wait until a query on the server at port $1 returns t, for at most $3 s.
wait_for_sql()
{
	local port=$1 sql=$2 n
	for n in $(seq $(($3 * 2))); do
		[ "$(as_postgres psql -X -qAt -h "$WORK" -p "$port" -d postgres -c "$sql" 2>/dev/null)" = t ] && return 0
		sleep 0.5
	done
	return 1
}

# A variable of the Makefile (REGRESS, ISOLATION), as make sees it.
make_var()
{
	make -s -C "$WORK" --no-print-directory PG_CONFIG="$PG_BIN/pg_config" \
		-f Makefile -f - "print-$1" <<<'print-%: ; @echo $($*)'
}

# valgrind: one server whose postmaster runs under memcheck, so every
# backend and background worker it forks does too; pg_regress (the
# Makefile's REGRESS, sql/execute_hostile.sql's crash inputs among them)
# and pg_isolation_regress (ISOLATION) run against it, with the worker
# expiring in their databases.  Each test file counts as under regress and
# isolation; one more line, valgrind/memcheck, fails on any valgrind error
# whose stack passes through idempotency.so and on any process killed by a
# signal.  Errors valgrind reports inside PostgreSQL alone (Debian's build
# is not made for valgrind: uninitialised padding written to WAL and files)
# are counted in a note.  palloc'd memory is not instrumented in that
# build either, so a use after pfree inside one memory context goes unseen.
# The isolation specs run under memcheck: those whose C paths only
# concurrency reaches (a waiter woken through shared memory, a lease moved
# after a wait, idem_execute's race for a new key, a takeover, the guard's
# hook, a row type changed under a cached read, key locks in rolled-back
# savepoints), and wait => false, which must answer at once however slow
# the backend (docs/guarantees.md).  The others' paths are memchecked by the regress files; all
# of them run on every version without valgrind.  A subset, for the test
# command's time (under 75 minutes on a fresh machine).
VALGRIND_ISOLATION="claim_nowait await execute_race lease_after_wait takeover guard_index key_lock_savepoints row_type_change"

suite_valgrind()
{
	local port data=$WORK/valgrind_data logs=$WORK/valgrind_logs vg ours n pid specs
	say "valgrind (memcheck: pg_regress and the isolation specs against a server under valgrind)"
	port=$(free_port 55632)
	as_postgres mkdir -p "$logs" "$WORK/valgrind_regress" "$WORK/valgrind_isolation"
	as_postgres initdb -D "$data" -A trust --no-sync >/dev/null || { fail "valgrind (initdb)"; return; }
	cat >>"$data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$WORK'
shared_preload_libraries = 'idempotency'
CONF
	# --track-origins=yes (where uninitialised bytes came from) makes
	# memcheck much slower and finds no more errors: it is for reading one,
	# so IDEM_VALGRIND_ORIGINS=1 turns it on
	runuser -u postgres -- env -C "$WORK" setsid valgrind --quiet --trace-children=yes \
		--track-origins="$([ "${IDEM_VALGRIND_ORIGINS:-0}" = 1 ] && echo yes || echo no)" \
		--num-callers=40 --leak-check=no --error-limit=no \
		--log-file="$logs/%p.log" "$PG_BIN/postgres" -D "$data" >"$data/server.log" 2>&1 </dev/null &
	pid=$!
	for n in $(seq 600); do
		as_postgres pg_isready -q -h "$WORK" -p "$port" && break
		sleep 0.5
	done
	if ! as_postgres pg_isready -q -h "$WORK" -p "$port"; then
		fail "valgrind (server did not start)"
		tail_logs "$data/server.log"
		kill "$pid" 2>/dev/null
		return
	fi
	# shellcheck disable=SC2046
	# (IDEM_UNDER_VALGRIND: sql/batch.sql does not count the rows a batch
	# moved after a sleep, which memcheck's slowness brings about)
	run_logged "$WORK/valgrind_regress.log" runuser -u postgres -- env -C "$WORK" \
		IDEM_UNDER_VALGRIND=1 PATH="$PG_BIN:$PATH" "$PGXS_DIR/src/test/regress/pg_regress" \
		--bindir="$PG_BIN" --host="$WORK" --port="$port" --inputdir=. \
		--outputdir="$WORK/valgrind_regress" --dbname=contrib_regression $(make_var REGRESS)
	count_regress valgrind/regress "$WORK/valgrind_regress.log"
	cat "$WORK/valgrind_regress/regression.diffs" 2>/dev/null
	# the specs of VALGRIND_ISOLATION, in the Makefile's order; a name no
	# longer in ISOLATION (renamed) fails here rather than run nothing
	specs=""
	for n in $VALGRIND_ISOLATION; do
		case " $(make_var ISOLATION) " in *" $n "*) ;; *) fail "valgrind/isolation ($n is not in the Makefile's ISOLATION)" ;; esac
	done
	for n in $(make_var ISOLATION); do
		case " $VALGRIND_ISOLATION " in *" $n "*) specs="$specs $n" ;; esac
	done
	# shellcheck disable=SC2086
	run_logged "$WORK/valgrind_isolation.log" runuser -u postgres -- env -C "$WORK" \
		PATH="$PG_BIN:$PATH" "$PGXS_DIR/src/test/isolation/pg_isolation_regress" \
		--bindir="$PG_BIN" --host="$WORK" --port="$port" --inputdir=test \
		--outputdir="$WORK/valgrind_isolation" --load-extension=idempotency \
		--dbname=isolation_regression $specs
	count_regress valgrind/isolation "$WORK/valgrind_isolation.log"
	cat "$WORK/valgrind_isolation/regression.diffs" 2>/dev/null
	# the background worker: a pass that expires rows (the tests above keep
	# its settings at their defaults, which guc.sql checks)
	if as_postgres psql -X -q -h "$WORK" -p "$port" -d postgres -v ON_ERROR_STOP=1 \
		-c "CREATE EXTENSION idempotency" \
		-c "INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
			SELECT 'vg', 'k' || i, 'completed', i, now(), now(), now() - interval '1 s'
			FROM generate_series(1, 100) i" \
		-c "ALTER SYSTEM SET idempotency.worker_interval = '1s'" \
		-c "SELECT pg_reload_conf()" >"$WORK/valgrind_worker.log" 2>&1 &&
		wait_for_sql "$port" "SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'vg'" 300; then
		pass "valgrind/worker (a pass expired 100 rows)"
	else
		fail "valgrind/worker"
		cat "$WORK/valgrind_worker.log"
	fi
	as_postgres pg_ctl -D "$data" -m fast -w -t 300 stop >/dev/null
	wait "$pid" 2>/dev/null

	vg=$(cat "$logs"/*.log 2>/dev/null | grep -cE '^==[0-9]+== [A-Z]')
	ours=$(valgrind_ours "$logs"/*.log)
	if ! grep -qs 'valgrind' "$logs"/*.log && [ "$(find "$logs" -name '*.log' | wc -l)" -eq 0 ]; then
		fail "valgrind/memcheck (valgrind wrote no log: the server did not run under it)"
	elif [ -z "$ours" ] && ! grep -q 'terminated by signal' "$data/server.log"; then
		pass "valgrind/memcheck (no error through idempotency.so, no crash)"
		[ "$vg" -eq 0 ] || note "$vg valgrind errors inside PostgreSQL alone, not through the extension"
	else
		fail "valgrind/memcheck"
		grep 'terminated by signal' "$data/server.log"
		printf '%s\n' "$ours"
	fi
}

# The valgrind error records of the logs given whose own stack passes
# through the extension's code: a frame in idempotency.so (or in one of its
# source files, where valgrind reads debug information), other than the
# worker's entry points alone, which call PostgreSQL's own start-up
# (InitPostgres writes uninitialised padding of the relcache init file).
# The stack valgrind adds of where uninitialised bytes came from does not
# count: Debian's build does not mark palloc'd memory, so it names the
# allocation that first malloc'd the memory context's block, whoever later
# took the bytes from it (a WAL write at commit named a palloc0 made inside a claim).
valgrind_ours()
{
	local files
	files=$(cd src && ls -- *.c citus/*.c | sed 's,.*/,,; s,\.c$,,' | paste -sd '|')
	awk -v files="$files" '
		/^==[0-9]+== [A-Z]/ { rec = $0 "\n"; ours = 0; own = 1; next }
		/^==[0-9]+==  *(at|by) / {
			if (rec == "") next
			rec = rec $0 "\n"
			if (own && ($0 ~ /idempotency\.so/ || $0 ~ ("\\((" files ")\\.c:[0-9]+\\)")) &&
				$0 !~ /: idem_(worker|launcher)_main /)
				ours = 1
			next
		}
		/^==[0-9]+== $/ { if (rec != "" && ours) printf "%s", rec; rec = ""; next }
		{ if (rec != "") { rec = rec $0 "\n"; own = 0 } }
	' "$@" 2>/dev/null
}

# citus: test/citus/checks.sh on a throwaway cluster under $WORK/citus;
# each of its "ok NAME" / "not ok NAME" lines counts once ("# " lines after
# a failure say why).  Citus must be installed into PG_BIN's PostgreSQL:
# when it is not, ../shared/citus/build.sh (beside the repository) builds
# and installs it (as root, ~2 min); with neither the suite is skipped.
suite_citus()
{
	local pkglib build=../shared/citus/build.sh line n=0 why=""
	say "citus (test/citus/checks.sh: Citus as ../shared/citus/build.sh picks it, 1 coordinator + 2 workers)"
	pkglib=$("$PG_BIN/pg_config" --pkglibdir)
	if [ ! -f "$pkglib/citus.so" ]; then
		if [ ! -f "$build" ]; then
			skip "citus (Citus is not installed in $pkglib and there is no $build)"
			return
		fi
		note "Citus is not installed in $pkglib: running $build"
		if ! run_logged "$WORK/citus_build.log" env PG_CONFIG="$PG_BIN/pg_config" "${CITUS_BUILD_ENV[@]}" bash "$build"; then
			fail "citus (build.sh failed)"
			tail_logs "$WORK/citus_build.log"
			return
		fi
		note "$(tail -n 1 "$WORK/citus_build.log")"
	fi
	run_logged "$WORK/citus.log" env PG_BIN="$PG_BIN" bash test/citus/checks.sh "$WORK/citus"
	while IFS= read -r line; do
		case $line in
		"ok "*)
			n=$((n + 1))
			pass "${line#ok }"
			why=""
			;;
		"not ok "*)
			n=$((n + 1))
			fail "${line#not ok }"
			why=1
			;;
		"# "*) [ -n "$why" ] && printf '          %s\n' "${line#\# }" ;;
		*)
			why=""
			note "$line"
			;;
		esac
	done <"$WORK/citus.log"
	if [ "$n" -eq 0 ]; then
		fail "citus (did not run)"
		tail_logs "$WORK/citus.log"
	fi
	bash test/citus/cluster.sh stop "$WORK/citus" >/dev/null 2>&1
}

# monitoring: Debian's prometheus-postgres-exporter with monitoring/queries.yaml
# against a server with two databases that have the extension and traffic
# of every kind in each; the scrape must give each database its own exact
# counters (labelled datname), the worker's passes in the database it
# worked on, zeros after a restart (the counters are not kept across one),
# and every metric that monitoring/grafana-dashboard.json references.
suite_monitoring()
{
	local exporter=/usr/bin/prometheus-postgres-exporter data=$WORK/monitoring_data port eport n
	local scrape=$WORK/monitoring.scrape dash=monitoring/grafana-dashboard.json m v db help
	local -a flags
	say "monitoring (prometheus-postgres-exporter with monitoring/queries.yaml)"
	if [ ! -x "$exporter" ] || ! command -v jq >/dev/null || ! command -v curl >/dev/null; then
		fail "monitoring (prometheus-postgres-exporter, jq or curl is not installed: bash test/run.sh monitoring installs them)"
		return
	fi
	port=$(free_port 5487)
	if ! start_server "$data" "$port" "idempotency.worker_databases = 'pay_b'
idempotency.worker_interval = '200ms'"; then
		fail "monitoring (server did not start)"
		return
	fi
	mon_sql() { as_postgres psql -X -qAt -v ON_ERROR_STOP=0 -h "$WORK" -p "$port" -d "$1" -c "$2" 2>/dev/null; }
	for db in pay_a pay_b; do
		mon_sql postgres "CREATE DATABASE $db" >/dev/null
		mon_sql "$db" "CREATE EXTENSION idempotency" >/dev/null
	done
	mon_sql postgres "CREATE ROLE exporter LOGIN IN ROLE idempotency_admin" >/dev/null
	# pay_a: every outcome, a mismatch, a complete and a fail
	as_postgres psql -X -q -h "$WORK" -p "$port" -d pay_a >"$WORK/monitoring.traffic" 2>&1 <<'SQL'
SELECT token AS t FROM idem_claim('a1', '{"x": 1}', 's') \gset
SELECT idem_complete('a1', 200, '{}', 's', :t);
SELECT idem_claim('a1', '{"x": 1}', 's');
SELECT idem_claim('a1', '{"x": 1}', 's');
SELECT idem_claim('a1', '{"x": 2}', 's');
SELECT idem_claim('a2', NULL, 's');
SELECT idem_claim('a2', NULL, 's');
SELECT idem_claim('a3', NULL, 's', lease => '10 ms');
SELECT pg_sleep(0.05);
SELECT idem_claim('a3', NULL, 's');
SET idempotency.stale_policy = 'hold';
SELECT idem_claim('a4', NULL, 's', lease => '10 ms');
SELECT pg_sleep(0.05);
SELECT idem_claim('a4', NULL, 's');
RESET idempotency.stale_policy;
SELECT token AS t FROM idem_claim('a5', NULL, 's') \gset
SELECT idem_fail('a5', 's', :t);
SQL
	# pay_b: three new keys, a complete, a replay
	as_postgres psql -X -q -h "$WORK" -p "$port" -d pay_b >>"$WORK/monitoring.traffic" 2>&1 <<'SQL'
SELECT token AS t FROM idem_claim('b1', NULL, 's') \gset
SELECT idem_claim('b' || i, NULL, 's') FROM generate_series(2, 3) i;
SELECT idem_complete('b1', 201, '{}', 's', :t);
SELECT idem_claim('b1', NULL, 's');
SQL
	for n in $(seq 60); do
		[ "$(mon_sql pay_b "SELECT worker_passes > 0 FROM idempotency_stats")" = t ] && break
		sleep 0.5
	done
	if [ "$(mon_sql pay_b "SELECT worker_passes > 0 FROM idempotency_stats")" = t ]; then
		pass "monitoring/worker (passes counted in pay_b)"
	else
		fail "monitoring/worker (no worker pass counted in pay_b)"
	fi

	eport=$(free_port 9187)
	# Only the queries file: the built-in metrics off, and every collector
	# its --help lists (0.11.1: database, bgwriter; later versions have
	# more), since with two DSNs of one server each would report the same
	# series twice and fail the scrape (docs/operations.md)
	flags=(--extend.query-path="$WORK/monitoring/queries.yaml" --web.listen-address="127.0.0.1:$eport")
	help=$("$exporter" --help 2>&1)
	for m in disable-default-metrics disable-settings-metrics; do
		grep -qE -- "--(\[no-\])?$m\b" <<<"$help" && flags+=("--$m")
	done
	for m in $(grep -oE -- '--(\[no-\])?collector\.[a-z_]+' <<<"$help" | sed -E 's/^--(\[no-\])?collector\.//' | sort -u); do
		flags+=("--no-collector.$m")
	done
	note "$("$exporter" --version 2>&1 | head -n 1); ${flags[*]:2}"
	setsid runuser -u postgres -- env -C "$WORK" \
		DATA_SOURCE_NAME="postgresql://exporter@127.0.0.1:$port/pay_a?sslmode=disable,postgresql://exporter@127.0.0.1:$port/pay_b?sslmode=disable" \
		"$exporter" "${flags[@]}" >"$WORK/monitoring.exporter.log" 2>&1 </dev/null &
	CHILD=$!
	mon_scrape()
	{
		for _ in $(seq 40); do
			curl -s "http://127.0.0.1:$eport/metrics" >"$scrape" 2>/dev/null &&
				grep -q '^idempotency_claims_new{.*datname="pay_b"' "$scrape" &&
				grep -q '^idempotency_claims_new{.*datname="pay_a"' "$scrape" && return 0
			sleep 0.5
		done
		return 1
	}
	# the value of metric $1 for database $2 in the last scrape
	mon_value() { sed -nE "s/^$1\{(.*,)?datname=\"$2\"(,.*)?\} ([^ ]+)\$/\3/p" "$scrape"; }
	mon_expect()
	{
		local what=$1 db=$2 metrics=$3 want=$4 got="" m
		for m in $metrics; do got="$got${got:+ }$m=$(mon_value "idempotency_$m" "$db")"; done
		if [ "$got" = "$want" ]; then
			pass "monitoring/$what"
		else
			fail "monitoring/$what"
			printf '          want: %s\n          got:  %s\n' "$want" "$got"
		fi
	}
	if ! mon_scrape; then
		fail "monitoring/scrape (no idempotency metrics for both databases)"
		tail_logs "$WORK/monitoring.exporter.log" "$scrape" "$WORK/monitoring.traffic"
	else
		pass "monitoring/scrape ($(grep -c '^idempotency_' "$scrape") idempotency samples)"
		m="claims_new claims_replay claims_in_progress claims_reclaimed claims_stale claims_awaited request_mismatches attempts_exhausted completes fails stale_tokens worker_errors"
		mon_expect "pay_a counters" pay_a "$m" \
			"claims_new=5 claims_replay=2 claims_in_progress=1 claims_reclaimed=1 claims_stale=1 claims_awaited=0 request_mismatches=1 attempts_exhausted=0 completes=1 fails=1 stale_tokens=0 worker_errors=0"
		mon_expect "pay_b counters" pay_b "$m" \
			"claims_new=3 claims_replay=1 claims_in_progress=0 claims_reclaimed=0 claims_stale=0 claims_awaited=0 request_mismatches=0 attempts_exhausted=0 completes=1 fails=0 stale_tokens=0 worker_errors=0"
		mon_expect "pay_a gauges" pay_a "processing_keys stale_processing_keys" \
			"processing_keys=3 stale_processing_keys=1"
		mon_expect "worker passes only where the worker ran" pay_a "worker_passes" "worker_passes=0"
		v=$(mon_value idempotency_table_bytes pay_a)
		if [ -n "$v" ] && awk "BEGIN { exit !($v > 0) }"; then
			pass "monitoring/table_bytes ($v)"
		else
			fail "monitoring/table_bytes (got '$v')"
		fi
		# every metric the dashboard references is one the exporter produces
		n=0
		for m in $(jq -r '[.. | objects | (.expr?, .definition?, .query?) | strings] | .[]' "$dash" |
			grep -oE 'idempotency_[a-z_]+' | sort -u); do
			n=$((n + 1))
			grep -qE "^$m(\{| )" "$scrape" || { fail "monitoring/dashboard ($m is not in the scrape)"; n=-1000; }
		done
		if [ "$n" -gt 0 ]; then
			pass "monitoring/dashboard ($n metrics, all scraped)"
		elif [ "$n" -eq 0 ]; then
			fail "monitoring/dashboard (no metric found in $dash)"
		fi
		# a restart loses the counters (like pg_stat_statements)
		as_postgres pg_ctl -D "$data" -m fast -w restart -l "$data/server.log" >/dev/null
		: >"$scrape"
		for _ in $(seq 40); do
			curl -sf "http://127.0.0.1:$eport/metrics" >"$scrape" 2>/dev/null &&
				[ "$(mon_value idempotency_claims_new pay_a)" = 0 ] && break
			sleep 0.5
		done
		mon_expect "restart zeroes the counters" pay_a "claims_new claims_replay processing_keys" \
			"claims_new=0 claims_replay=0 processing_keys=3"
	fi
	kill -TERM -- "-$CHILD" 2>/dev/null
	wait "$CHILD" 2>/dev/null
	CHILD=""
	stop_server "$data"
}
