#!/usr/bin/env bash
# test/citus/repro_020.sh: replays the README's scale-out recipe on a cluster
# that test/citus/cluster.sh started in DIR, with the extension as it is
# (0.2.0), and prints what each step answers.  Errors are expected: this is
# the record behind test/citus/findings.md ("B.").  Nothing is
# asserted; it exits 0 unless the cluster cannot be reached.
#
#   bash test/citus/cluster.sh start /tmp/cc && bash test/citus/repro_020.sh /tmp/cc
#
# As root.  Takes about 15 s.  Leaves tables payments and idempotency_keys
# distributed, and idem_claim, idem_release and idem_lookup delegated.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=test/lib/common.sh
. "$here/../lib/common.sh"
[ $# -eq 1 ] || { echo "usage: $0 DIR (a cluster started by cluster.sh)" >&2; exit 2; }
DIR=$(cd "$1" && pwd) || exit 2
WORK=$DIR
# shellcheck disable=SC1091
. "$DIR/cluster.env" || exit 2

# psql on the coordinator; errors do not stop the script
coord()
{
	as_postgres psql -X -h "$DIR" -p "$COORDINATOR_PORT" -d postgres -v VERBOSITY=terse "$@" 2>&1 |
		sed -E 's/assign_distributed_transaction_id\([^)]*\)/assign_distributed_transaction_id(...)/'
}

say "distribute (README recipe)"
coord <<'SQL'
CREATE TABLE payments (merchant_id text NOT NULL, id bigserial, amount int, PRIMARY KEY (merchant_id, id));
SELECT create_distributed_table('payments', 'merchant_id');
SELECT create_distributed_table('idempotency_keys', 'scope', colocate_with => 'payments');
SQL

say "claim, then complete / heartbeat / fail (STABLE over columns in UPDATE)"
coord <<'SQL'
SELECT outcome, token FROM idem_claim('k1', scope => 's1');
SELECT idem_complete('k1', 200, '{"ok":1}', scope => 's1', token => 1);
SELECT idem_heartbeat('k1', scope => 's1', token => 1);
SELECT idem_fail('k1', scope => 's1', token => 1);
SQL

say "takeover after the lease, and resolve (nextval() in UPDATE)"
coord <<'SQL'
SELECT outcome, token FROM idem_claim('k2', scope => 's1', lease => '1 second');
SELECT pg_sleep(1.2);
SELECT outcome, token FROM idem_claim('k2', scope => 's1');
SELECT idem_resolve('k2', 's1', 'fail');
SQL

say "expiry (FOR UPDATE SKIP LOCKED without the distribution column)"
coord -c "SELECT idem_expire()"

say "idem_execute: the CTE is planned as a subplan plus an intermediate result"
coord <<'SQL'
SET citus.log_remote_commands = on; SET citus.log_local_commands = on; SET client_min_messages = log;
SELECT outcome, token, response FROM idem_execute('e1', '{"a":1}', 's1', 201,
  'INSERT INTO payments (merchant_id, amount) VALUES ($1, $2) RETURNING id, amount', 's1'::text, 100);
SQL

say "delegation: tokens repeat across nodes and a stale token releases another claim"
coord <<'SQL'
SELECT create_distributed_function('idem_claim(text,jsonb,text,interval,interval,boolean)', 'scope', colocate_with => 'idempotency_keys');
SELECT create_distributed_function('idem_release(text,text,bigint)', 'scope', colocate_with => 'payments');
SELECT create_distributed_function('idem_lookup(text,text)', 'scope', colocate_with => 'idempotency_keys');
SELECT 'sA' AS scope, outcome, token FROM idem_claim('d1', scope => 'sA');
SELECT 'sB' AS scope, outcome, token FROM idem_claim('d1', scope => 'sB');
SELECT 'sC' AS scope, outcome, token FROM idem_claim('d1', scope => 'sC');
SELECT 'sD' AS scope, outcome, token FROM idem_claim('d1', scope => 'sD');
-- A claims f2 on the coordinator (a transaction block is never delegated)
BEGIN; SELECT 'A' AS holder, outcome, token FROM idem_claim('f2', scope => 'sA') \gset a_
COMMIT;
SQL
# advance the sequence of the worker holding sA until its next value is A's token
a_token=$(coord -At -c "SELECT token FROM idem_lookup('f2', scope => 'sA')")
for _ in $(seq 1 60); do
	# constant arguments only: a volatile one (random()) would stop delegation
	t=$(coord -At -c "SELECT token FROM idem_claim('pad$RANDOM$RANDOM', scope => 'sA')")
	[ "$t" -ge $((a_token - 1)) ] 2>/dev/null && break
done
coord <<SQL
BEGIN; SELECT idem_resolve('f2', 'sA', 'release'); COMMIT;
SELECT 'B (delegated)' AS holder, outcome, token FROM idem_claim('f2', scope => 'sA');
SELECT 'A releases with its stale token $a_token' AS step, idem_release('f2', scope => 'sA', token => $a_token);
SELECT 'rows of f2 left' AS step, count(*) FROM idem_lookup('f2', scope => 'sA');
SQL

say "wait => false while another transaction holds the key uncommitted"
(
	echo "BEGIN; SELECT outcome FROM idem_claim('w1', scope => 'sA');"
	sleep 12
	echo "ROLLBACK;"
) | coord >/dev/null &
holder=$!
sleep 1
coord <<'SQL'
\timing on
SET statement_timeout = '3s';
-- delegated: runs on the worker, local execution, lock_timeout applies
SELECT outcome, retry_after FROM idem_claim('w1', scope => 'sA', wait => false);
-- not delegated: the worker's shard query waits (here until statement_timeout)
BEGIN; SELECT outcome, retry_after FROM idem_claim('w1', scope => 'sA', wait => false); ROLLBACK;
BEGIN; SET LOCAL lock_timeout = '1ms'; SELECT outcome FROM idem_claim('w1', scope => 'sA', wait => false); ROLLBACK;
SET citus.propagate_set_commands = 'local';
BEGIN; SET LOCAL lock_timeout = '1ms'; SELECT outcome FROM idem_claim('w1', scope => 'sA', wait => false); ROLLBACK;
SQL
wait "$holder"

say "background workers (server logs)"
for n in coordinator worker1 worker2; do
	echo "$n: $(grep -v ' psql ' "$DIR/$n/server.log" | grep -c 'could not run distributed query with FOR UPDATE/SHARE') failed passes, e.g.:"
	grep -v ' psql ' "$DIR/$n/server.log" | grep -m 1 -A 2 'could not run distributed query with FOR UPDATE/SHARE'
done
exit 0
