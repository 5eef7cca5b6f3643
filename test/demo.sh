#!/usr/bin/env bash
# The demo: bash test/demo.sh
#
# Builds and installs the extension, starts a throwaway PostgreSQL as the
# postgres OS user, and shows a payment being deduplicated: the same request
# sent three times, a duplicate that arrives while the first is still in
# flight, and a different request reusing the key.  Stops the server at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib/common.sh

install_packages
build_and_install
make_workdir
PORT=$(free_port 56432)
trap 'stop_server "$WORK/data"; rm -rf "$WORK"' EXIT
start_server "$WORK/data" "$PORT"

sql() { as_postgres psql -X -q -h "$WORK" -p "$PORT" -d postgres -v ON_ERROR_STOP=1 "$@"; }

sql -c "CREATE EXTENSION idempotency" \
	-c "CREATE TABLE payments (id bigserial PRIMARY KEY, order_id text NOT NULL, amount int NOT NULL)"

# One send of POST /payments: claim, and pay only when the claim is new,
# all in one transaction.  Prints what the client gets back.
send()
{
	local label=$1 amount=$2 hold=${3:-0}
	sql -At -F ' | ' <<SQL
BEGIN;
SELECT outcome AS claim FROM idem_claim('pay-6f1c', jsonb_build_object('order', 'A1', 'amount', $amount), 'merchant-42') \gset
SELECT :'claim' = 'new' AS is_new \gset
\if :is_new
INSERT INTO payments (order_id, amount) VALUES ('A1', $amount) RETURNING id AS payment_id \gset
SELECT pg_sleep($hold);
SELECT idem_complete('pay-6f1c', 201, jsonb_build_object('payment_id', :payment_id), 'merchant-42');
\endif
COMMIT;
SELECT '$label', :'claim', response_code, response
FROM idempotency_keys WHERE scope = 'merchant-42' AND key = 'pay-6f1c';
SQL
}

say "The same payment (key pay-6f1c) sent three times, plus a concurrent duplicate"
echo "send | outcome | status code | response the client gets"
send "send 1 (holds its transaction 2 s)" 3000 2 >"$WORK/first.out" &
sleep 0.5
send "duplicate of send 1, sent 0.5 s later (waited)" 3000 >"$WORK/duplicate.out"
wait
grep -hv '^$' "$WORK/first.out" "$WORK/duplicate.out"
send "send 2" 3000 | grep -v '^$'
send "send 3" 3000 | grep -v '^$'

say "The payments table: one row for four requests"
sql -c "SELECT id, order_id, amount FROM payments"

say "The same key with a different amount: refused (SQLSTATE IK001, HTTP 422)"
sql -v ON_ERROR_STOP=0 -v VERBOSITY=default \
	-c "\\set VERBOSITY verbose" \
	-c "SELECT * FROM idem_claim('pay-6f1c', '{\"order\": \"A1\", \"amount\": 1}', 'merchant-42')" 2>&1 |
	grep -E "ERROR|DETAIL|HINT" || true

say "The same in one round trip with idem_execute"
for i in 1 2 3; do
	sql -At -F ' | ' -c "SELECT 'send $i', outcome, response_code, response FROM idem_execute('pay-7a2b',
		'{\"order\": \"B2\", \"amount\": 500}', 'merchant-42', 201,
		'INSERT INTO payments (order_id, amount) VALUES (\$1, \$2) RETURNING id AS payment_id', 'B2', 500)"
done
sql -c "SELECT order_id, count(*) AS payments FROM payments GROUP BY order_id ORDER BY order_id"
say "done: the server is stopped and its files removed"
