#!/usr/bin/env bash
# test/edition/monitoring.sh PG_BIN DIR PORT EPORT: monitoring/queries.yaml
# and monitoring/grafana-dashboard.json against the SQL edition, installed
# each way, on one throwaway server run from PG_BIN (data and socket in DIR,
# port PORT, also on 127.0.0.1 for the exporter) with
# shared_preload_libraries = 'pg_tle'; prometheus-postgres-exporter listens
# on 127.0.0.1:EPORT.  PG_BIN must have no C build installed
# (test/edition/prepare.sh makes such a copy).  As the postgres OS user,
# after make edition.  Prints "ok monitoring/NAME" or "not ok
# monitoring/NAME" (the reasons as "# " lines); exits non-zero when one
# failed.
#
# Two databases: pay_tle (the pg_tle install, as on RDS) and pay_plain (the
# plain script, as on Cloud SQL), the same traffic in each: a completed key
# replayed, a processing key, a processing key whose lease ran out.  The
# exporter logs in as a role granted idempotency_admin, as
# docs/operations.md says.  The edition keeps no counters (no shared
# memory: docs/managed.md, What differs, "counters"): the counter columns
# (claims_*, request_mismatches, attempts_exhausted, completes, fails,
# stale_tokens, leases_expired, rows_deleted, worker_passes, worker_errors)
# are NULL, which the exporter reports as NaN; the gauges (processing_keys,
# stale_processing_keys, oldest_processing_seconds, table_bytes) come from
# the table and are checked for their values.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_BIN=${1:?usage: test/edition/monitoring.sh PG_BIN DIR PORT EPORT}
DIR=${2:?usage: test/edition/monitoring.sh PG_BIN DIR PORT EPORT}
PORT=${3:?usage: test/edition/monitoring.sh PG_BIN DIR PORT EPORT}
EPORT=${4:?usage: test/edition/monitoring.sh PG_BIN DIR PORT EPORT}
export PATH="$PG_BIN:$PATH"
version=$(sed -nE "s/^default_version = '([^']+)'/\1/p" "$root/idempotency.control")
PLAIN=$root/edition/dist/idempotency-sql--$version.sql
TLE=$root/edition/dist/idempotency-pgtle--$version.sql
QUERIES=$root/monitoring/queries.yaml
DASH=$root/monitoring/grafana-dashboard.json
EXPORTER=/usr/bin/prometheus-postgres-exporter
DATA=$DIR/data
SCRAPE=$DIR/scrape
failed=0
# shellcheck source=test/edition/lib.sh
. "$root/test/edition/lib.sh"
ok() { echo "ok $1"; }

[ -f "$PLAIN" ] && [ -f "$TLE" ] || { notok "monitoring (no $PLAIN: make edition first)"; exit 1; }
if [ -e "$(pg_config --sharedir)/extension/idempotency.control" ]; then
	notok "monitoring (the C build is installed in $PG_BIN's PostgreSQL: use test/edition/prepare.sh's copy)"
	exit 1
fi
if [ ! -x "$EXPORTER" ] || ! command -v jq >/dev/null || ! command -v curl >/dev/null; then
	notok "monitoring (prometheus-postgres-exporter, jq or curl is not installed: bash test/run.sh monitoring installs them)"
	exit 1
fi

edition_server monitoring/server "listen_addresses = '127.0.0.1'" "shared_preload_libraries = 'pg_tle'"
CHILD=""
trap '[ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null; pg_ctl -D "$DATA" -m fast -w stop >/dev/null 2>&1' EXIT

# the service's admin role (rds_superuser, cloudsqlsuperuser) installs
if ! out=$(q postgres postgres -c "CREATE ROLE svc_admin LOGIN NOSUPERUSER CREATEROLE CREATEDB" \
	-c "CREATE DATABASE pay_tle OWNER svc_admin" -c "CREATE DATABASE pay_plain OWNER svc_admin") ||
	! out=$(q postgres pay_tle -c "CREATE EXTENSION pg_tle" -c "GRANT pgtle_admin TO svc_admin") ||
	! out=$(q svc_admin pay_tle -f "$TLE" -c "CREATE EXTENSION idempotency") ||
	! out=$(q svc_admin pay_plain -f "$PLAIN") ||
	! out=$(q svc_admin postgres -c "CREATE ROLE exporter LOGIN IN ROLE idempotency_admin"); then
	notok "monitoring/install (pg_tle in pay_tle, the plain script in pay_plain, the exporter's role)" "$out"
	exit 1
fi
# the traffic: k1 completed and replayed, k2 processing, k3 processing
# with its lease run out
for db in pay_tle pay_plain; do
	if ! out=$(q svc_admin "$db" <<'SQL'
SELECT token AS t FROM idem_claim('k1', '{"x": 1}', 's') \gset
SELECT idem_complete('k1', 200, '{}', 's', :t);
SELECT outcome FROM idem_claim('k1', '{"x": 1}', 's');
SELECT outcome FROM idem_claim('k2', NULL, 's');
SELECT outcome FROM idem_claim('k3', NULL, 's', lease => '10 ms');
SELECT pg_sleep(0.05);
SQL
	); then
		notok "monitoring/$db/traffic" "$out"
	fi
done

# the query of queries.yaml, as the exporter's role, straight
query=$(awk '/^  query: \|/ { on = 1; next } on && /^  [a-z]/ { exit } on { print }' "$QUERIES")
counters="claims_new claims_replay claims_in_progress claims_reclaimed claims_stale claims_awaited request_mismatches attempts_exhausted completes fails stale_tokens leases_expired rows_deleted worker_passes worker_errors"
for db in pay_tle pay_plain; do
	nulls=$(for c in $counters; do printf "(%s IS NULL)::int + " "$c"; done)
	if out=$(q exporter "$db" -c "SELECT count(*), sum(${nulls}0), min(processing_keys), min(stale_processing_keys),
		bool_and(oldest_processing_seconds > 0), bool_and(table_bytes > 0) FROM ($query) s"); then
		if [ "$out" = "1|15|2|1|t|t" ]; then
			ok "monitoring/$db/query (queries.yaml, as a role granted idempotency_admin: one row; the 15 counters NULL, no shared memory; processing_keys 2, stale_processing_keys 1, oldest_processing_seconds and table_bytes > 0)"
		else
			notok "monitoring/$db/query" "want (rows|NULL counters|processing_keys|stale_processing_keys|oldest > 0|table_bytes > 0): 1|15|2|1|t|t
got:  $out"
		fi
	else
		notok "monitoring/$db/query (queries.yaml's query failed as the exporter's role)" "$out"
	fi
done

# the exporter, as the C build's suite runs it (suite_monitoring): the
# queries file only
flags=(--extend.query-path="$QUERIES" --web.listen-address="127.0.0.1:$EPORT")
help=$("$EXPORTER" --help 2>&1)
for m in disable-default-metrics disable-settings-metrics; do
	grep -qE -- "--(\[no-\])?$m\b" <<<"$help" && flags+=("--$m")
done
for m in $(grep -oE -- '--(\[no-\])?collector\.[a-z_]+' <<<"$help" | sed -E 's/^--(\[no-\])?collector\.//' | sort -u); do
	flags+=("--no-collector.$m")
done
DATA_SOURCE_NAME="postgresql://exporter@127.0.0.1:$PORT/pay_tle?sslmode=disable,postgresql://exporter@127.0.0.1:$PORT/pay_plain?sslmode=disable" \
	"$EXPORTER" "${flags[@]}" >"$DIR/exporter.log" 2>&1 </dev/null &
CHILD=$!
: >"$SCRAPE"
for _ in $(seq 40); do
	curl -s "http://127.0.0.1:$EPORT/metrics" >"$SCRAPE" 2>/dev/null &&
		grep -q '^idempotency_processing_keys{.*datname="pay_tle"' "$SCRAPE" &&
		grep -q '^idempotency_processing_keys{.*datname="pay_plain"' "$SCRAPE" && break
	sleep 0.5
done
value() { sed -nE "s/^$1\{(.*,)?datname=\"$2\"(,.*)?\} ([^ ]+)\$/\3/p" "$SCRAPE"; }
if ! grep -q '^idempotency_processing_keys{.*datname="pay_plain"' "$SCRAPE" ||
	! grep -q '^idempotency_processing_keys{.*datname="pay_tle"' "$SCRAPE"; then
	notok "monitoring/scrape (no idempotency metrics for both databases)" "$(tail -n 20 "$DIR/exporter.log")"
else
	# (newer exporters, trixie's and forky's, warn at start that they found no
	# postgres_exporter.yml and that queries.yaml's form is deprecated: the
	# C build's monitoring suite runs them the same way)
	errs=$(grep -iE 'level=(error|warn)' "$DIR/exporter.log" |
		grep -viE 'msg="Error loading config" err="error opening config file \\"postgres_exporter.yml\\"|msg="The extended queries.yaml config is DEPRECATED"' |
		head -n 5)
	if [ -z "$errs" ]; then
		ok "monitoring/scrape ($(grep -c '^idempotency_' "$SCRAPE") idempotency samples, no error in the exporter's log)"
	else
		notok "monitoring/scrape (the exporter logged errors)" "$errs"
	fi
	for db in pay_tle pay_plain; do
		got=""
		for c in $counters; do got="$got${got:+ }$c=$(value "idempotency_$c" "$db")"; done
		want=$(for c in $counters; do printf '%s=NaN ' "$c"; done | sed 's/ $//')
		if [ "$got" = "$want" ]; then
			ok "monitoring/$db/counters (all 15 scraped as NaN: the edition keeps no counters)"
		else
			notok "monitoring/$db/counters" "want: $want
got:  $got"
		fi
		got="processing_keys=$(value idempotency_processing_keys "$db") stale_processing_keys=$(value idempotency_stale_processing_keys "$db")"
		if [ "$got" = "processing_keys=2 stale_processing_keys=1" ]; then
			ok "monitoring/$db/gauges ($got)"
		else
			notok "monitoring/$db/gauges" "want: processing_keys=2 stale_processing_keys=1
got:  $got"
		fi
		v=$(value idempotency_table_bytes "$db")
		w=$(value idempotency_oldest_processing_seconds "$db")
		if [ -n "$v" ] && [ -n "$w" ] && awk "BEGIN { exit !($v > 0 && $w > 0) }"; then
			ok "monitoring/$db/table_bytes ($v), oldest_processing_seconds ($w)"
		else
			notok "monitoring/$db/table_bytes (got '$v'), oldest_processing_seconds (got '$w')"
		fi
	done
	# every metric the dashboard references is one the exporter produces
	n=0 missing=""
	for m in $(jq -r '[.. | objects | (.expr?, .definition?, .query?) | strings] | .[]' "$DASH" |
		grep -oE 'idempotency_[a-z_]+' | sort -u); do
		n=$((n + 1))
		grep -qE "^$m\{.*datname=\"pay_(tle|plain)\"" "$SCRAPE" || missing="$missing $m"
	done
	if [ "$n" -gt 0 ] && [ -z "$missing" ]; then
		ok "monitoring/dashboard ($n metrics, all scraped from both installs)"
	else
		notok "monitoring/dashboard ($n metrics in $DASH; not scraped:${missing:- none})"
	fi
fi
kill -TERM "$CHILD" 2>/dev/null
wait "$CHILD" 2>/dev/null
CHILD=""
grep -E 'PANIC|server process .* was terminated' "$DIR/server.log" && notok "monitoring/server (a backend crashed: server.log above)"
exit "$failed"
