#!/usr/bin/env bash
# The demo: bash test/demo.sh
#
# Installs what it needs (as test/run.sh does), builds and installs the
# extension, starts a throwaway PostgreSQL 15 as the postgres OS user, and
# shows a payment being deduplicated: the same POST /payments request sent
# three times, each in its own transaction (claim; when new, pay and record
# the response; commit), a duplicate that arrives while the first is still
# in flight (it waits, then replays), the payments table with one row, and
# the same key reused with a different amount (refused with its SQLSTATE).
# Stops the server and removes its files at the end, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib/common.sh

install_packages
build_and_install
make_workdir
PORT=$(free_port 56432)
trap 'stop_server "$WORK/data"; kill_servers_under "$WORK"; rm -rf "$WORK"' EXIT
start_server "$WORK/data" "$PORT"

sql() { as_postgres psql -X -q -h "$WORK" -p "$PORT" -d postgres -v ON_ERROR_STOP=1 "$@"; }

sql -c "CREATE EXTENSION idempotency" \
	-c "CREATE TABLE payments (id bigserial PRIMARY KEY, order_id text NOT NULL,
	                           amount int NOT NULL, currency text NOT NULL)"

KEY=pay-6f1c
SCOPE=merchant-42

# One send of POST /payments {"order": "A1", "amount": AMOUNT, "currency":
# "TWD"}, as the service runs it: in one transaction, claim the key; when
# the claim is new, insert the payment and record the response; commit.
# HOLD seconds of other work after paying keep the transaction open.
# Prints: label|outcome|response code|response|ms spent in idem_claim
send()
{
	local label=$1 amount=$2 hold=${3:-0}
	sql -At <<SQL
BEGIN;
SELECT clock_timestamp() AS t0 \gset
SELECT outcome, coalesce(response_code::text, '-') AS code, coalesce(response::text, '-') AS body
FROM idem_claim('$KEY', request => '{"order": "A1", "amount": $amount, "currency": "TWD"}',
                scope => '$SCOPE') \gset claim_
SELECT round(extract(epoch FROM clock_timestamp() - :'t0') * 1000) AS ms \gset
SELECT :'claim_outcome' = 'new' AS is_new \gset
\if :is_new
    INSERT INTO payments (order_id, amount, currency) VALUES ('A1', $amount, 'TWD')
    RETURNING id AS payment_id \gset
    SELECT pg_sleep($hold) \gset
    SELECT 201 AS code, jsonb_build_object('payment_id', :payment_id, 'status', 'paid')::text AS body \gset claim_
    SELECT idem_complete('$KEY', :claim_code, :'claim_body', scope => '$SCOPE') \gset
\endif
COMMIT;
\echo $label|:claim_outcome|:claim_code|:claim_body|:ms
SQL
}

show()
{
	while IFS='|' read -r label outcome code body ms; do
		printf '  %-38s %-8s %-5s %-36s %s ms\n' "$label" "$outcome" "$code" "$body" "$ms"
	done
}

say "1. The same payment request (Idempotency-Key $KEY) sent three times, plus a duplicate in flight"
printf '  %-38s %-8s %-5s %-36s %s\n' "send" "outcome" "code" "response" "in idem_claim"
send "send 1 (keeps its transaction 2 s)" 3000 2 >"$WORK/send1.out" &
FIRST=$!
# the duplicate goes out once send 1 has claimed and is still working
for _ in $(seq 100); do
	busy=$(sql -At -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(2)%'
	                   AND state = 'active' AND pid <> pg_backend_pid()")
	[ "$busy" = 1 ] && break
	sleep 0.1
done
send "duplicate sent while send 1 is open" 3000 >"$WORK/dup.out"
wait "$FIRST"
show <"$WORK/send1.out"
show <"$WORK/dup.out"
send "send 2" 3000 | show
send "send 3" 3000 | show
echo "  (new: paid and recorded; replay: nothing done, the stored response returned;"
echo "   the duplicate waited for send 1 to commit, as INSERT ... ON CONFLICT would)"

say "2. The payments table: one row for four requests"
sql -c "SELECT id, order_id, amount, currency FROM payments ORDER BY id" | sed -e "/^$/d" -e "s/^/  /"

say "3. The same key with a different amount: refused, nothing stored is changed"
sql -v ON_ERROR_STOP=0 2>&1 <<SQL | sed -e 's/^psql:<stdin>:[0-9]*: //' -e 's/^/  /'
\set VERBOSITY default
\set SHOW_CONTEXT never
BEGIN;
SELECT outcome FROM idem_claim('$KEY', request => '{"order": "A1", "amount": 1, "currency": "TWD"}',
                               scope => '$SCOPE');
ROLLBACK;
\echo 'SQLSTATE' :LAST_ERROR_SQLSTATE '(the service answers 422)'
SQL
sql -At -c "SELECT 'payments: ' || count(*) FROM payments" | sed 's/^/  /'
sql -At -c "SELECT 'stored for $KEY: ' || status || ' ' || response_code || ' ' || response
            FROM idempotency_keys WHERE scope = '$SCOPE' AND key = '$KEY'" | sed 's/^/  /'

say "done: server stopped, files removed"
