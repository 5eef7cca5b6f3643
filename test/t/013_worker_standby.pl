# The background worker on a hot standby: nothing runs and nothing is
# logged, due rows and stale claims stay as the primary left them; after
# promotion the launcher starts and the worker expires them, leaving live
# rows alone.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

# The primary runs with the worker idle, so the due rows reach the standby.
my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.worker_databases = ''
idempotency.worker_interval = '100ms'
});
$primary->start;
$primary->safe_psql('postgres', q{
    CREATE EXTENSION idempotency;
    INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
    SELECT 'due', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() - interval '1 s'
    FROM generate_series(1, 10) i;
    INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
    SELECT 'live', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() + interval '1 day'
    FROM generate_series(1, 10) i;
    INSERT INTO idempotency_keys (scope, key, status, token, locked_until, created_at, updated_at, expires_at)
    SELECT 'stale', 'k' || i, 'processing', nextval('idempotency_token_seq'), now() - interval '1 s',
           now(), now(), now() + interval '1 day'
    FROM generate_series(1, 5) i;
});
$primary->backup('b');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', q{idempotency.worker_databases = 'postgres'});
$standby->start;
$primary->wait_for_catchup($standby);

my $state = q{
    SELECT count(*) FILTER (WHERE scope = 'due') || ' '
        || count(*) FILTER (WHERE scope = 'live') || ' '
        || count(*) FILTER (WHERE scope = 'stale' AND status = 'processing')
    FROM idempotency_keys};

usleep(1_500_000);
is($standby->safe_psql('postgres',
    q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idempotency%'}),
    '0', 'no launcher and no pass run on a hot standby');
is($standby->safe_psql('postgres', $state), '10 10 5',
    'the standby leaves due rows and stale claims as they are');
my $log = slurp_file($standby->logfile);
unlike($log, qr/\b(ERROR|FATAL|PANIC):/, 'and logs no error about it');
unlike($log, qr/idempotency launcher started/, 'the launcher never started');

$standby->promote;
ok($standby->poll_query_until('postgres',
    q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'}),
    'after promotion the launcher starts');
ok($standby->poll_query_until('postgres', "SELECT ($state) = '0 10 0'"),
    'and the worker deletes the due rows and expires the stale claims, leaving live rows');
is($standby->safe_psql('postgres',
    q{SELECT count(*) FROM idempotency_keys WHERE scope = 'stale' AND status = 'failed' AND retryable}),
    '5', 'the stale claims are now takeover-ready');
# (promotion itself ends the walreceiver with a FATAL)
is(join("\n", grep { /\b(ERROR|FATAL|PANIC):/ && !/terminating walreceiver process/ }
        split /\n/, slurp_file($standby->logfile)),
    '', 'with no error in the log');

$standby->stop;
$primary->stop;
done_testing();
