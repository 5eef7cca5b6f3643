#!/usr/bin/env bash
#
# bench/exactly_once.sh: the exactly-once load test.
#
# Many clients claim a few shared keys at once (test/workload/claim_contention.sql);
# afterwards every key must have exactly one payment and exactly one 'new'
# claim, and every replay must equal the stored response.
#
#   PGHOST=... PGPORT=... PGDATABASE=... bench/exactly_once.sh [options]
#
#   -c N   clients                 (env CLIENTS, default 8)
#   -j N   pgbench threads         (env JOBS, default 2)
#   -t N   transactions per client (env TRANSACTIONS, default 1000)
#   -k N   shared keys             (env KEYS, default 50)
#   -M M   pgbench query mode: simple, extended, prepared (env MODE, default simple)
#   -U R   run pgbench as role R, e.g. one granted only idempotency_app
#          (env BENCH_USER; setup and checks still run as the connecting user)
#   -s S   script: contention (test/workload/claim_contention.sql, the default: fixed
#          keys) or burst (test/workload/claim_burst.sql: fresh keys every 100 ms, so
#          duplicates keep arriving while the first claim is uncommitted)
#          (env SCRIPT)
#
# The connecting user must be able to CREATE EXTENSION idempotency (or it is
# already installed) and create schema idem_bench, which is dropped and made
# anew.  Exits 0 when exactly-once held, 1 when a check failed, 2 when
# pgbench or psql failed.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../test/workload" && pwd)

clients=${CLIENTS:-8}
jobs=${JOBS:-2}
transactions=${TRANSACTIONS:-1000}
keys=${KEYS:-50}
mode=${MODE:-simple}
bench_user=${BENCH_USER:-}
script=${SCRIPT:-contention}
psql=${PSQL:-psql}
pgbench=${PGBENCH:-pgbench}

usage()
{
	sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

while getopts 'c:j:t:k:M:U:s:h' opt; do
	case $opt in
		c) clients=$OPTARG ;;
		j) jobs=$OPTARG ;;
		t) transactions=$OPTARG ;;
		k) keys=$OPTARG ;;
		M) mode=$OPTARG ;;
		U) bench_user=$OPTARG ;;
		s) script=$OPTARG ;;
		*) usage ;;
	esac
done

for n in "$clients" "$jobs" "$transactions" "$keys"; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "exactly_once.sh: not a positive number: $n" >&2; exit 2; }
done
if (( jobs > clients )); then
	jobs=$clients
fi
total=$(( clients * transactions ))
case $script in
	contention) script_file=$here/claim_contention.sql; check_keys=$keys ;;
	burst) script_file=$here/claim_burst.sql; check_keys=0 ;;
	*) echo "exactly_once.sh: unknown script: $script" >&2; exit 2 ;;
esac

out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "== setup (schema idem_bench, scope idem-bench)"
"$psql" -X -q -v ON_ERROR_STOP=1 -f "$here/exactly_once_setup.sql" || exit 2

user_opt=()
[[ -n $bench_user ]] && user_opt=(-U "$bench_user")

echo "== pgbench ($script): $clients clients x $transactions transactions over $keys keys ($jobs threads, -M $mode${bench_user:+, as $bench_user})"
start=$(date +%s.%N)
set +e
"$pgbench" -n -r -c "$clients" -j "$jobs" -t "$transactions" -M "$mode" \
	-D nkeys="$keys" "${user_opt[@]}" -f "$script_file" >"$out" 2>&1
rc=$?
set -e
end=$(date +%s.%N)
cat "$out"
if (( rc != 0 )); then
	echo "exactly_once.sh: pgbench failed (exit $rc)" >&2
	exit 2
fi
if grep -Eq 'ERROR|aborted' "$out"; then
	echo "exactly_once.sh: pgbench reported errors" >&2
	exit 2
fi

echo "== checks"
checks=$("$psql" -X -At -F '|' -v ON_ERROR_STOP=1 -v nkeys="$check_keys" -v total="$total" \
	-f "$here/exactly_once_check.sql") || exit 2

failed=0
while IFS='|' read -r name ok found; do
	if [[ $ok == t ]]; then
		printf 'ok      %s (%s)\n' "$name" "$found"
	else
		printf 'FAILED  %s (%s)\n' "$name" "$found"
		failed=$(( failed + 1 ))
	fi
done <<<"$checks"

tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$out")
elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
payments=$("$psql" -X -At -c 'SELECT count(*) FROM idem_bench.payments')
replays=$("$psql" -X -At -c "SELECT count(*) FROM idem_bench.claims WHERE outcome = 'replay'")

echo "== summary"
echo "transactions: $total in ${elapsed}s, tps ${tps:-?}"
echo "payments: $payments; replays: $replays"
if (( failed > 0 )); then
	echo "EXACTLY-ONCE VIOLATED: $failed check(s) failed"
	exit 1
fi
echo "exactly-once held"
