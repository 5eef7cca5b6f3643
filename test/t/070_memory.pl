# The memory class (issue 35): every function that reads or returns stored
# data, fed the hostile forms (numbers of 131,072 digits in 10 stored bytes,
# recovery points of 1 MB that compress to 12 kB, 10,000 keys), stays within
# a stated multiple of its input and stored bytes, measured as its
# backend's peak (VmHWM), and within a sanity bound of time.
#
# Each case runs in a backend of its own: a warm-up (the same call on a key
# with small data, so the library, plans and caches are in), the backend's
# peak then as its baseline, the call, and the peak after.  It holds that
#   peak - baseline <= SLACK + K x (input + stored)
# where stored is the raw (decompressed) size of the responses and recovery
# points of the keys the call may read; for idem_claim_batch, which holds
# its answers until its last key, also at most
#   SLACK + BATCH_HELD + K x (input + the largest key's stored bytes),
# the 256 MB its answers may hold, counted in full.  K, SLACK and BATCH_HELD
# are stated in docs/guarantees.md.
#
# Every function of the extension is either a case here or listed in
# %reads_nothing_stored with why: a function added later fails the last
# check until it is one or the other.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

plan skip_all => 'needs /proc/self/status (Linux)' unless -r '/proc/self/status';

my $MB = 1024 * 1024;
my $K = 8;
my $SLACK = 32 * $MB;
my $BATCH_HELD = 256 * $MB;
# A sanity bound of time only (the memory bound is the check): 5 s, and 1 s
# more per 50 MB of stored data read (1 MB takes about 10 ms to fetch,
# decompress and answer)
my $MAX_SECONDS = 5;
my $BYTES_PER_SECOND = 50 * $MB;

my $node = PostgreSQL::Test::Cluster->new('memory');
$node->init;
# shared memory a backend touches counts in its peak too: keep it small
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
shared_buffers = 16MB
work_mem = 4MB
});
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE mem');

# The stored data.  mem_stored has the raw bytes of each key's response and
# recovery point (pg_column_size of the value before it was stored).
$node->safe_psql('mem', q{
CREATE EXTENSION idempotency;
CREATE TABLE mem_payments (id serial PRIMARY KEY, n int);
CREATE FUNCTION mem_hwm() RETURNS bigint LANGUAGE sql
    AS $$ SELECT substring(pg_read_file('/proc/self/status') FROM 'VmHWM:\s*(\d+) kB')::bigint * 1024 $$;
-- 1,990 numbers of 131,072 digits as text: 260 MB printed, 579 bytes stored
CREATE TABLE mem_values AS
    SELECT (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 1990)) AS huge,
           '[1e131071]'::jsonb AS one,
           repeat('x', 1024 * 1024 - 4) AS rp;
CREATE TABLE mem_stored (key text PRIMARY KEY, bytes bigint NOT NULL);
INSERT INTO mem_stored
    SELECT k, (SELECT pg_column_size(jsonb_agg('1e131071'::numeric)) FROM generate_series(1, 1990))
    FROM unnest(ARRAY['num-done', 'num-failed']) k;

-- completed, and failed retryable after 1 attempt, with the huge numbers;
-- and their small counterparts for the warm-up
CREATE FUNCTION mem_settle(k text, body jsonb, done boolean) RETURNS void LANGUAGE sql AS $$
    SELECT CASE WHEN done
        THEN idem_complete(k, 200, body, 'mem', (SELECT token FROM idem_claim(k, '{"amount": 1}', 'mem')))
        ELSE idem_fail(k, 'mem', (SELECT token FROM idem_claim(k, '{"amount": 1}', 'mem')), 502, body, true) END
$$;
SELECT mem_settle('num-done', huge, true), mem_settle('num-failed', huge, false),
       mem_settle('small-done', '[1]', true), mem_settle('small-failed', '[1]', false) FROM mem_values;

-- 600 claims whose lease ran out, each with a recovery point of 1 MB (12 kB
-- stored); one alive; and small counterparts
INSERT INTO idempotency_keys (scope, key, status, token, locked_until, created_at, updated_at,
                              expires_at, recovery_point, due_at)
    SELECT 'mem', k, 'processing', nextval('idempotency_token_seq'), lease, now(), now(),
           now() + interval '1 day', v.rp, now() + interval '1 day'
    FROM mem_values v,
         LATERAL (SELECT format('rp-%s', lpad(g::text, 4, '0')), now() - interval '1 min'
                  FROM generate_series(1, 600) g
                  UNION ALL SELECT 'rp-live', now() + interval '1 day') s(k, lease);
INSERT INTO idempotency_keys (scope, key, status, token, locked_until, created_at, updated_at,
                              expires_at, recovery_point, due_at)
    SELECT 'mem', k, 'processing', nextval('idempotency_token_seq'), lease, now(), now(),
           now() + interval '1 day', 'small', now() + interval '1 day'
    FROM (VALUES ('small-rp', now() - interval '1 min'), ('small-live', now() + interval '1 day')) s(k, lease);
INSERT INTO mem_stored SELECT key, octet_length(recovery_point) FROM idempotency_keys WHERE key LIKE 'rp-%';

-- 10,000 keys completed with a number of 131,072 digits (10 stored bytes)
-- each, and 10,000 claims in flight
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at,
                              response_code, response, due_at, retryable)
    SELECT 'mem', format('n-%s', lpad(g::text, 5, '0')), 'completed', nextval('idempotency_token_seq'),
           now(), now(), now() + interval '1 day', 200, v.one, now() + interval '1 day', true
    FROM mem_values v, generate_series(1, 10000) g;
INSERT INTO mem_stored SELECT key, (SELECT pg_column_size(one) FROM mem_values)
    FROM idempotency_keys WHERE key LIKE 'n-%';
INSERT INTO idempotency_keys (scope, key, status, token, locked_until, created_at, updated_at,
                              expires_at, due_at)
    SELECT 'mem', format('p-%s', lpad(g::text, 5, '0')), 'processing', nextval('idempotency_token_seq'),
           now() + interval '1 day', now(), now(), now() + interval '2 days', now() + interval '1 day'
    FROM generate_series(1, 10000) g;
VACUUM ANALYZE;
});

# The cases: each a function, its warm-up and its call (SQL run in a fresh
# backend; run: rolled back), the keys whose stored data it may read (a
# predicate on mem_stored.key), its input bytes, the SQLSTATE it must end
# with, and whether its answers are held (idem_claim_batch).
my $huge_input = 16;
my $keys10k = 10000 * 16;
my @cases = (
	{ fn => 'idem_claim', name => 'replay of the huge numbers',
	  warm => q{SELECT outcome FROM idem_claim('small-done', '{"amount": 1}', 'mem')},
	  call => q{SELECT outcome, pg_column_size(response) FROM idem_claim('num-done', '{"amount": 1}', 'mem')},
	  stored => q{key = 'num-done'}, input => $huge_input },
	{ fn => 'idem_claim', name => 'attempts_exhausted around the huge numbers', rollback => 1,
	  warm => q{SELECT outcome FROM idem_claim('small-failed', '{"amount": 1}', 'mem', max_attempts => 1)},
	  call => q{SELECT outcome, pg_column_size(response) FROM idem_claim('num-failed', '{"amount": 1}', 'mem', max_attempts => 1)},
	  stored => q{key = 'num-failed'}, input => $huge_input },
	{ fn => 'idem_claim', name => 'stale, answering a 1 MB recovery point',
	  set => q{SET idempotency.stale_policy = hold},
	  warm => q{SELECT outcome FROM idem_claim('small-rp', NULL, 'mem')},
	  call => q{SELECT outcome, octet_length(recovery_point) FROM idem_claim('rp-0001', NULL, 'mem')},
	  stored => q{key = 'rp-0001'}, input => 16 },
	{ fn => 'idem_claim', name => 'reclaimed, answering a 1 MB recovery point', rollback => 1,
	  warm => q{SELECT outcome FROM idem_claim('small-rp', NULL, 'mem')},
	  call => q{SELECT outcome, octet_length(recovery_point) FROM idem_claim('rp-0001', NULL, 'mem')},
	  stored => q{key = 'rp-0001'}, input => 16 },
	{ fn => 'idem_claim', name => 'await_result, reading a 1 MB recovery point each poll',
	  warm => q{SELECT outcome FROM idem_claim('small-live', NULL, 'mem', await_result => '20 ms')},
	  call => q{SELECT outcome FROM idem_claim('rp-live', NULL, 'mem', await_result => '300 ms')},
	  stored => q{key = 'rp-live'}, input => 16 },
	{ fn => 'idem_execute', name => 'replay of the huge numbers',
	  warm => q{SELECT outcome FROM idem_execute('small-done', '{"amount": 1}', 'mem', 201, 'INSERT INTO mem_payments (n) VALUES (1) RETURNING id')},
	  call => q{SELECT outcome, pg_column_size(response) FROM idem_execute('num-done', '{"amount": 1}', 'mem', 201, 'INSERT INTO mem_payments (n) VALUES (1) RETURNING id')},
	  stored => q{key = 'num-done'}, input => 100 },
	{ fn => 'idem_execute', name => 'attempts_exhausted around the huge numbers', rollback => 1,
	  set => q{SET idempotency.max_attempts = 1},
	  warm => q{SELECT outcome FROM idem_execute('small-failed', '{"amount": 1}', 'mem', 201, 'INSERT INTO mem_payments (n) VALUES (1) RETURNING id')},
	  call => q{SELECT outcome, pg_column_size(response) FROM idem_execute('num-failed', '{"amount": 1}', 'mem', 201, 'INSERT INTO mem_payments (n) VALUES (1) RETURNING id')},
	  stored => q{key = 'num-failed'}, input => 100 },
	{ fn => 'idem_claim_batch', name => '10,000 replays of 131,072-digit numbers', held => 1, rollback => 1,
	  warm => q{SELECT count(*) FROM idem_claim_batch(ARRAY['small-done', 'small-rp'], scope => 'mem')},
	  call => q{SELECT count(*), sum(pg_column_size(response)) FROM idem_claim_batch(
	              ARRAY(SELECT format('n-%s', lpad(g::text, 5, '0')) FROM generate_series(1, 10000) g), scope => 'mem')},
	  stored => q{key LIKE 'n-%'}, input => $keys10k },
	{ fn => 'idem_claim_batch', name => '600 recovery points of 1 MB (54000)', held => 1, state => '54000',
	  set => q{SET idempotency.stale_policy = hold},
	  warm => q{SELECT count(*) FROM idem_claim_batch(ARRAY['small-done', 'small-rp'], scope => 'mem')},
	  call => q{SELECT count(*), sum(octet_length(recovery_point)) FROM idem_claim_batch(
	              ARRAY(SELECT format('rp-%s', lpad(g::text, 4, '0')) FROM generate_series(1, 600) g), scope => 'mem')},
	  stored => q{key LIKE 'rp-0%'}, input => 600 * 16 },
	{ fn => 'idem_claim_batch', name => '10,000 keys, 600 of them with 1 MB recovery points (54000)',
	  held => 1, state => '54000', rollback => 1,
	  warm => q{SELECT count(*) FROM idem_claim_batch(ARRAY['small-done', 'small-rp'], scope => 'mem')},
	  call => q{SELECT count(*), sum(octet_length(recovery_point)) FROM idem_claim_batch(
	              ARRAY(SELECT format('rp-%s', lpad(g::text, 4, '0')) FROM generate_series(1, 600) g) ||
	              ARRAY(SELECT format('n-%s', lpad(g::text, 5, '0')) FROM generate_series(601, 10000) g), scope => 'mem')},
	  stored => q{key LIKE 'rp-0%' OR key BETWEEN 'n-00601' AND 'n-10000'}, input => $keys10k },
	{ fn => 'idem_record_batch', name => '10,000 results of 131,072-digit numbers', rollback => 1,
	  warm => q{SELECT idem_record_batch(ARRAY['small-live'], ARRAY[200], ARRAY['[1]'::jsonb], 'mem',
	              ARRAY[(SELECT token FROM idempotency_keys WHERE key = 'small-live')])},
	  call => q{SELECT idem_record_batch(array_agg(key ORDER BY key), array_agg(200), array_agg('[1e131071]'::jsonb), 'mem',
	              array_agg(token ORDER BY key)) FROM idempotency_keys WHERE scope = 'mem' AND key LIKE 'p-%'},
	  stored => q{false}, input => 10000 * 40 },
	{ fn => 'idem_record_batch', name => 'over 600 recovery points of 1 MB', rollback => 1,
	  warm => q{SELECT idem_record_batch(ARRAY['small-rp'], ARRAY[200], ARRAY['[1]'::jsonb], 'mem',
	              ARRAY[(SELECT token FROM idempotency_keys WHERE key = 'small-rp')])},
	  call => q{SELECT idem_record_batch(array_agg(key ORDER BY key), array_agg(200), array_agg('[1]'::jsonb), 'mem',
	              array_agg(token ORDER BY key)) FROM idempotency_keys WHERE scope = 'mem' AND key LIKE 'rp-0%'},
	  stored => q{key LIKE 'rp-0%'}, input => 600 * 40 },
	{ fn => 'idem_lookup', name => 'a 1 MB recovery point',
	  warm => q{SELECT octet_length(recovery_point) FROM idem_lookup('small-rp', 'mem')},
	  call => q{SELECT octet_length(recovery_point) FROM idem_lookup('rp-0001', 'mem')},
	  stored => q{key = 'rp-0001'}, input => 16 },
	{ fn => 'idem_lookup', name => 'the huge numbers',
	  warm => q{SELECT pg_column_size(response) FROM idem_lookup('small-done', 'mem')},
	  call => q{SELECT pg_column_size(response) FROM idem_lookup('num-done', 'mem')},
	  stored => q{key = 'num-done'}, input => 16 },
	{ fn => 'idem_complete', name => 'a stale token on a key with a 1 MB recovery point (IK002)', state => 'IK002',
	  warm => q{SELECT idem_complete('small-live', 200, '[1]', 'mem', 1)},
	  call => q{SELECT idem_complete('rp-live', 200, '[1e131071]', 'mem', 1)},
	  stored => q{key = 'rp-live'}, input => 32 },
	{ fn => 'idem_fail', name => 'a stale token on a key with a 1 MB recovery point (IK002)', state => 'IK002',
	  warm => q{SELECT idem_fail('small-live', 'mem', 1, 500, '[1]')},
	  call => q{SELECT idem_fail('rp-live', 'mem', 1, 500, '[1e131071]')},
	  stored => q{key = 'rp-live'}, input => 32 },
	{ fn => 'idem_heartbeat', name => 'a key with a 1 MB recovery point', rollback => 1,
	  warm => q{SELECT idem_heartbeat('small-live', 'mem', (SELECT token FROM idempotency_keys WHERE key = 'small-live'))},
	  call => q{SELECT idem_heartbeat('rp-live', 'mem', (SELECT token FROM idempotency_keys WHERE key = 'rp-live'))},
	  stored => q{key = 'rp-live'}, input => 32 },
	{ fn => 'idem_checkpoint', name => 'a 1 MB recovery point over another', rollback => 1,
	  warm => q{SELECT idem_checkpoint('small-live', 'y', 'mem', (SELECT token FROM idempotency_keys WHERE key = 'small-live'))},
	  call => q{SELECT idem_checkpoint('rp-live', repeat('y', 1024 * 1024 - 4), 'mem', (SELECT token FROM idempotency_keys WHERE key = 'rp-live'))},
	  stored => q{key = 'rp-live'}, input => $MB },
	{ fn => 'idem_release', name => 'a key with a 1 MB recovery point', rollback => 1,
	  warm => q{SELECT idem_release('small-live', 'mem', (SELECT token FROM idempotency_keys WHERE key = 'small-live'))},
	  call => q{SELECT idem_release('rp-live', 'mem', (SELECT token FROM idempotency_keys WHERE key = 'rp-live'))},
	  stored => q{key = 'rp-live'}, input => 32 },
	{ fn => 'idem_resolve', name => 'a key with a 1 MB recovery point, failed with the huge numbers', rollback => 1,
	  warm => q{SELECT idem_resolve('small-live', 'mem', 'fail', 500, '[1]')},
	  call => q{SELECT idem_resolve('rp-live', 'mem', 'fail', 500, (SELECT huge FROM mem_values))},
	  # its input, the huge numbers, counted as num-done's stored bytes
	  stored => q{key IN ('rp-live', 'num-done')}, input => 32 },
	{ fn => 'idem_expire', name => '600 claims with 1 MB recovery points due', rollback => 1,
	  warm => q{SELECT idem_expire(1)},
	  call => q{SELECT idem_expire()},
	  stored => q{key LIKE 'rp-%'}, input => 0 },
);

# What reads no response nor recovery point of a key, and why
my %reads_nothing_stored = (
	idem_request_hash => 'hashes its argument (sql/hash.sql: cost follows the stored size)',
	idem_row_storable => 'the CHECK constraint: looks at the row written (the cases that write run it)',
	idem_stats => 'counters',
	idem_stats_databases => 'counters',
	idem_stats_reset => 'counters',
	idem_key_lock => 'a lock',
	idem_table_bytes => 'sizes from the catalog',
	idem_distribute => 'Citus DDL',
	idem_save_row_security => 'policies',
	idem_restore_row_security => 'policies',
	idem_row_security_restored => 'a trigger on the policies table',
);

my %covered;
foreach my $c (@cases)
{
	$covered{ $c->{fn} } = 1;
	my $label = "$c->{fn}: $c->{name}";
	my $want_state = $c->{state} // '00000';
	my ($begin, $end) = $c->{rollback} ? ("BEGIN;\n", "ROLLBACK;\n") : ('', '');
	my $set = $c->{set} ? "$c->{set};\n" : '';
	my $script = $set
	  . $begin . "$c->{warm};\n" . $end
	  . "SELECT mem_hwm() AS base, extract(epoch FROM clock_timestamp()) AS t0 \\gset\n"
	  . $begin . "$c->{call};\n"
	  . "\\set state :SQLSTATE\n" . $end
	  . "SELECT :base, mem_hwm(), extract(epoch FROM clock_timestamp()) - :t0, :'state';\n";
	my ($out, $err) = ('', '');
	$node->psql('mem', $script, stdout => \$out, stderr => \$err, on_error_stop => 0);
	my $last = (split /\n/, $out)[-1] // '';
	my ($base, $peak, $seconds, $state) = split /\|/, $last;
	unless (defined $state)
	{
		fail("$label: measured");
		diag("stdout:\n$out\nstderr:\n$err");
		next;
	}
	my ($stored, $largest) = split /\|/, $node->safe_psql('mem',
		"SELECT coalesce(sum(bytes), 0), coalesce(max(bytes), 0) FROM mem_stored WHERE $c->{stored}");
	my $bound = $SLACK + $K * ($c->{input} + $stored);
	if ($c->{held})
	{
		my $held_bound = $SLACK + $BATCH_HELD + $K * ($c->{input} + $largest);
		$bound = $held_bound if $held_bound < $bound;
	}
	my $used = $peak - $base;
	is($state, $want_state, "$label: ends with $want_state")
	  or diag("stderr:\n$err");
	cmp_ok($used, '<=', $bound,
		sprintf('%s: peak %.1f MB over its baseline, bound %.1f MB (input %d kB, stored %d kB)',
			$label, $used / $MB, $bound / $MB, $c->{input} / 1024, $stored / 1024));
	my $max_seconds = $MAX_SECONDS + $stored / $BYTES_PER_SECOND;
	cmp_ok($seconds, '<', $max_seconds, sprintf('%s: %.2f s (bound %.0f s)', $label, $seconds, $max_seconds));
}

# every function of the extension is a case or reads nothing stored
my @functions = split /\n/, $node->safe_psql('mem', q{
	SELECT DISTINCT p.proname FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
	WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
	  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')
	ORDER BY 1});
my @unclassified = grep { !$covered{$_} && !$reads_nothing_stored{$_} } @functions;
is(join(', ', @unclassified), '', 'every function of the extension is a case here or reads nothing stored');
ok(scalar(@functions) > 20, 'the functions were found (' . scalar(@functions) . ')');

$node->stop;
done_testing();
