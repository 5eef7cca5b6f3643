# The background worker: expiry works, settings reload on SIGHUP, the
# launcher comes back after pg_terminate_backend and kill -9, databases
# without the extension or dropped ones cause no error loop, a hot standby
# does nothing until promoted, and under claim load it removes exactly the
# due rows in batches no larger than worker_batch_size.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('primary');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.worker_databases = 'postgres, noext, gone, nosuchdb'
idempotency.worker_interval = '100ms'
idempotency.worker_batch_size = 1000
log_min_messages = log
restart_after_crash = on
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');
$node->safe_psql('postgres', 'CREATE DATABASE noext');

# Errors in the log other than the ones a test causes on purpose
sub log_errors
{
	my ($from) = @_;
	my $log = slurp_file($node->logfile, $from);
	my @bad = grep { /\b(ERROR|FATAL|PANIC):/ && !/terminating background worker .* due to administrator command/ && !/terminating connection due to administrator command/ }
	  split /\n/, $log;
	return join("\n", @bad);
}

sub launcher_pid
{
	my ($n) = @_;
	return $n->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'");
}

# -- it runs, and shows itself
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'"),
	'the launcher shows in pg_stat_activity as "idempotency launcher"');
ok($node->poll_query_until('postgres',
	"SELECT worker_passes > 0 FROM idempotency_stats"),
	'workers make passes');

# -- stale claims become takeover-ready, due rows are deleted, live rows stay
$node->safe_psql('postgres', q{
	SELECT idem_stats_reset();
	SELECT count(*) FROM generate_series(1, 30) i, idem_claim('stale-' || i, NULL, 'w', lease => '1 ms');
	SELECT count(*) FROM generate_series(1, 30) i, idem_claim('live-' || i, NULL, 'w');
	INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
	SELECT 'w', 'due-' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() - interval '1 s'
	FROM generate_series(1, 40) i;
});
ok($node->poll_query_until('postgres', q{
	SELECT count(*) FILTER (WHERE key LIKE 'due-%') = 0
	   AND count(*) FILTER (WHERE key LIKE 'stale-%' AND status = 'failed' AND retryable) = 30
	FROM idempotency_keys WHERE scope = 'w'}),
	'stale claims expired and due rows deleted');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM idempotency_keys WHERE scope = 'w' AND key LIKE 'live-%' AND status = 'processing'"),
	'30', 'live claims untouched');
is($node->safe_psql('postgres', 'SELECT leases_expired || \' \' || rows_deleted FROM idempotency_stats'),
	'30 40', 'idempotency_stats counts what the worker did');
is($node->safe_psql('postgres',
	q{SELECT outcome FROM idem_claim('stale-1', NULL, 'w')}), 'reclaimed',
	'an expired claim is taken over by the next claim');

# -- SIGHUP reloads the batch size
my $logpos = -s $node->logfile;
$node->append_conf('postgresql.conf', 'idempotency.worker_batch_size = 7');
$node->reload;
$node->safe_psql('postgres', q{
	SELECT pg_sleep(0.5);
	SELECT idem_stats_reset();
	INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
	SELECT 'h', 'due-' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() - interval '1 s'
	FROM generate_series(1, 50) i;
});
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'h'"),
	'after reload, due rows are deleted');
is($node->safe_psql('postgres', 'SELECT max_batch_rows FROM idempotency_stats'), '7',
	'after SIGHUP, batches hold at most the new worker_batch_size');

# -- the launcher comes back after pg_terminate_backend (SIGTERM) ...
my $pid = launcher_pid($node);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency launcher' AND pid <> $pid"),
	'the launcher is restarted after pg_terminate_backend');

# ... and after kill -9 (the postmaster restarts the whole cluster)
$pid = launcher_pid($node);
kill 'KILL', $pid;
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency launcher' AND pid <> $pid"),
	'the launcher is back after kill -9 and crash restart');
$node->safe_psql('postgres', q{
	INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
	SELECT 'k', 'due-' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() - interval '1 s'
	FROM generate_series(1, 5) i;
});
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'k'"),
	'and it works again');

# -- databases without the extension, missing, or dropped: quiet
$logpos = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE gone');
$node->safe_psql('gone', 'CREATE EXTENSION idempotency');
$node->safe_psql('postgres', 'SELECT pg_sleep(0.5)');
$node->safe_psql('postgres', 'DROP DATABASE gone');
$node->safe_psql('postgres', 'SELECT pg_sleep(1)');
# A pass started just before the DROP may log once that its database is
# gone; nothing else, and never again.
my @errors = grep { !/FATAL:  database \d+ does not exist/ } grep { $_ ne '' } split /\n/, log_errors($logpos);
is(join("\n", @errors), '', 'no errors for a database without the extension, a missing one, or a dropped one');
cmp_ok(scalar(() = log_errors($logpos) =~ /does not exist/g), '<=', 1, 'a dropped database is reported at most once');
$logpos = -s $node->logfile;
$node->safe_psql('postgres', 'SELECT pg_sleep(1)');
is(log_errors($logpos), '', 'and then never again: no error loop');
ok(launcher_pid($node) ne '', 'the launcher is still running');

# -- the load: 200,000 due and 200,000 live rows while 4 clients claim
$node->append_conf('postgresql.conf', 'idempotency.worker_batch_size = 1000');
$node->reload;
$node->safe_psql('postgres', q{
	SELECT pg_sleep(0.3);
	INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response_code, response)
	SELECT 'load', 'live-' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() + interval '1 day',
	       200, '{"ok": true}'
	FROM generate_series(1, 200000) i;
	SELECT idem_stats_reset();
	INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response_code, response)
	SELECT 'load', 'due-' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() - interval '1 s',
	       200, '{"ok": true}'
	FROM generate_series(1, 200000) i;
});
$logpos = -s $node->logfile;
$node->pgbench(
	'-n -c 4 -j 2 -T 5',
	0,
	[qr{processed: \d+}],
	[qr{^$}],
	'4 clients keep claiming while the worker expires',
	{
		'claims' => q{
\set k random(1, 1000000)
SELECT outcome FROM idem_claim('c' || :client_id || '-' || :k, NULL, 'claims');
SELECT outcome FROM idem_claim('live-' || :k % 200000 + 1, NULL, 'load');
}
	});
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'load' AND key LIKE 'due-%'", 't'),
	'every due row is removed');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM idempotency_keys WHERE scope = 'load' AND key LIKE 'live-%' AND status = 'completed'"),
	'200000', 'no live row is touched');
my ($deleted, $maxbatch) = split /\|/, $node->safe_psql('postgres',
	'SELECT rows_deleted, max_batch_rows FROM idempotency_stats');
is($deleted, '200000', 'the counters show exactly the due rows deleted');
cmp_ok($maxbatch, '<=', 1000, "the largest batch ($maxbatch rows) stays within worker_batch_size");
is(log_errors($logpos), '', 'no errors in the log during the load');

# -- a hot standby does nothing; after promotion the worker starts
$node->safe_psql('postgres', q{
	INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
	SELECT 's', 'due-' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() + interval '3 s'
	FROM generate_series(1, 10) i;
});
$node->backup('b');
$node->stop;    # the primary's worker must not delete them before the standby is checked
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'b', has_streaming => 1);
$standby->start;
$standby->safe_psql('postgres', 'SELECT pg_sleep(4)');    # the rows are now due
is($standby->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idempotency%'"),
	'0', 'no idempotency worker runs on a hot standby');
is($standby->safe_psql('postgres', "SELECT count(*) FROM idempotency_keys WHERE scope = 's'"),
	'10', 'the standby leaves due rows alone');
$standby->promote;
ok($standby->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 's'"),
	'after promotion the worker deletes the due rows');

$standby->stop;
done_testing();
