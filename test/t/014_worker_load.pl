# The background worker under load: 200,000 due rows among 200,000 live
# ones, while 4 pgbench clients keep claiming (test/workload/expire_claims.sql: a
# new key claimed and completed, and a live key replayed, per transaction).
# The worker removes exactly the due rows, touches no live row, no claim
# fails or sees anything but the expected outcome, and no expiry
# transaction changes more than worker_batch_size rows.
use strict;
use warnings;
use File::Basename qw(dirname);
use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use IdemTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $rows = 200_000;
my $batch = 1000;
my $seconds = 20;

my $node = PostgreSQL::Test::Cluster->new('load');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
idempotency.worker_databases = ''
idempotency.worker_interval = '100ms'
idempotency.worker_batch_size = $batch
});
$node->start;

# Fill with the worker idle, each row due when the functions would make it
$node->safe_psql('postgres', qq{
    CREATE EXTENSION idempotency;
    INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at,
                                  response_code, response, due_at)
    SELECT 'live', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(),
           now() + interval '1 day', 200, '{"payment_id": 1}', now() + interval '1 day'
    FROM generate_series(1, $rows) i;
    INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at,
                                  response_code, response, due_at)
    SELECT 'due', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(),
           now() - interval '1 s', 200, '{"payment_id": 1}', now() - interval '1 s'
    FROM generate_series(1, $rows) i;
    VACUUM ANALYZE idempotency_keys;
});
my $fingerprint = q{
    SELECT count(*) || ' ' || md5(string_agg(key || ':' || xmin || ':' || token || ':' || expires_at, ','
                                             ORDER BY key))
    FROM idempotency_keys WHERE scope = 'live'};
my $live_before = $node->safe_psql('postgres', $fingerprint);
$node->safe_psql('postgres', 'SELECT idem_stats_reset()');

# The claim load, in the background
my $script = dirname(__FILE__) . '/../workload/expire_claims.sql';
my ($out, $err) = ('', '');
my $pgbench = IPC::Run::start(
    [ 'pgbench', '-n', '-c', '4', '-j', '2', '-T', $seconds, '-D', "live_rows=$rows",
      '-f', $script, '-h', $node->host, '-p', $node->port, 'postgres' ],
    '>', \$out, '2>', \$err);
usleep(1_000_000);

# Start the worker
my $t0 = time;
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.worker_databases = 'postgres'});
$node->reload;
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'due'}),
    'every due row is removed');
my $took = time - $t0;
my $running = $pgbench->pumpable;
my $finished = $pgbench->finish;
note("pgbench: $out");
ok($running, sprintf('while the claims ran (the worker took %.1f s of their %d s)', $took, $seconds));

ok($finished, 'pgbench succeeded');
like($out, qr/number of failed transactions: 0 /, 'no claim failed or saw an unexpected outcome');
is($err, '', 'pgbench reported no error');
my ($tps) = $out =~ /tps = ([\d.]+)/;
cmp_ok($tps // 0, '>', 0, "claims went on ($tps transactions/s)");

is($node->safe_psql('postgres', $fingerprint), $live_before,
    'no live row is touched (same rows, xmin and tokens)');
my ($deleted, $expired, $maxbatch, $errors) = split /\|/, $node->safe_psql('postgres',
    'SELECT rows_deleted, leases_expired, max_batch_rows, worker_errors FROM idempotency_stats');
is($deleted, $rows, 'the counters show exactly the due rows deleted');
is($expired, 0, 'and no lease expired (every claim completed in its transaction)');
cmp_ok($maxbatch, '<=', $batch, "no expiry transaction changed more than worker_batch_size rows ($maxbatch)");
is($errors, 0, 'no pass failed');
is(log_errors($node, 0), '', 'no error in the server log');

$node->stop;
done_testing();
