# The background worker and signals.  A pass shows in pg_stat_activity as
# "idempotency worker"; SIGTERM (pg_terminate_backend) ends it at once, it
# is not restarted, and a later pass finishes the work; kill -9 of a pass
# makes the postmaster restart the cluster, and the work goes on.  The
# launcher: SIGTERM ends it at once and the postmaster starts it again
# 10 s later; kill -9 restarts the cluster and the launcher comes back.  A
# fast shutdown does not wait for a pass.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('signals');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.worker_databases = 'postgres'
idempotency.worker_interval = '100ms'
idempotency.worker_batch_size = 1000
restart_after_crash = on
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');

# $n completed rows in $scope, past expires_at
sub add_due_rows
{
    my ($scope, $n) = @_;
    $node->safe_psql('postgres', qq{
        INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
        SELECT '$scope', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(),
               now() - interval '1 s'
        FROM generate_series(1, $n) i});
}

sub set_batch_size
{
    my ($n) = @_;
    set_worker_setting($node, 'worker_batch_size', $n);
    wait_passes($node, 2);
}

sub count_rows
{
    my ($scope) = @_;
    return $node->safe_psql('postgres',
        "SELECT count(*) FROM idempotency_keys WHERE scope = '$scope'");
}

# The pid of a running pass, once there is one
sub pass_pid
{
    $node->poll_query_until('postgres',
        q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency worker'})
      or return '';
    return $node->safe_psql('postgres',
        q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'idempotency worker'});
}

sub launcher_pid
{
    return $node->safe_psql('postgres',
        q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'});
}

# Wait until pid is no longer a backend; returns the seconds it took
sub wait_gone
{
    my ($pid) = @_;
    my $t0 = time;
    $node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid")
      or return 1e9;
    return time - $t0;
}

# -- a long pass (batches of 2 rows) shows itself
set_batch_size(2);
add_due_rows('long', 20000);
my $pid = pass_pid();
isnt($pid, '', 'a pass shows in pg_stat_activity with backend_type "idempotency worker"');
is($node->safe_psql('postgres', qq{
    SELECT application_name || '|' || datname || '|' || query
    FROM pg_stat_activity WHERE pid = $pid}),
    'idempotency worker|postgres|idempotency expiry batch',
    'with its application_name, database and activity');

# -- SIGTERM ends a pass at once; it is not restarted, a later pass goes on
my $logpos = -s $node->logfile;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
cmp_ok(wait_gone($pid), '<', 5, 'pg_terminate_backend ends a pass at once');
ok($node->log_contains(
    qr/terminating background worker "idempotency worker" due to administrator command/,
    $logpos), 'and the log says why');
my $left = count_rows('long');
cmp_ok($left, '>', 0, "rows were left ($left)");
my $next = pass_pid();
isnt($next, $pid, 'a new pass (not a restart of the old one) takes over the work');

# -- kill -9 of a pass: crash restart, then the work goes on
my $launcher = launcher_pid();
$logpos = -s $node->logfile;
kill 'KILL', $next;
ok($node->poll_query_until('postgres', qq{
    SELECT count(*) = 1 FROM pg_stat_activity
    WHERE backend_type = 'idempotency launcher' AND pid <> $launcher}),
    'after kill -9 of a pass the cluster restarts and the launcher is back');
ok($node->log_contains(qr/all server processes terminated; reinitializing/, $logpos),
    'through a crash restart');
set_batch_size(1000);
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'long'}),
    'and every due row is deleted');

# -- SIGTERM of the launcher: it exits at once, the postmaster restarts it
#    10 s later
$launcher = launcher_pid();
my $t0 = time;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
cmp_ok(wait_gone($launcher), '<', 5, 'pg_terminate_backend ends the launcher at once');
ok($node->poll_query_until('postgres', qq{
    SELECT count(*) = 1 FROM pg_stat_activity
    WHERE backend_type = 'idempotency launcher' AND pid <> $launcher}),
    'the postmaster starts it again');
cmp_ok(time - $t0, '>=', 9, 'after its restart time of 10 s');
add_due_rows('after-term', 5);
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'after-term'}),
    'and it works');

# -- kill -9 of the launcher: crash restart, and it is back
$launcher = launcher_pid();
$logpos = -s $node->logfile;
kill 'KILL', $launcher;
ok($node->poll_query_until('postgres', qq{
    SELECT count(*) = 1 FROM pg_stat_activity
    WHERE backend_type = 'idempotency launcher' AND pid <> $launcher}),
    'after kill -9 of the launcher the cluster restarts and the launcher is back');
ok($node->log_contains(qr/all server processes terminated; reinitializing/, $logpos),
    'through a crash restart');
add_due_rows('after-kill', 5);
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'after-kill'}),
    'and it works');

# -- a fast shutdown does not wait for a pass
set_batch_size(2);
add_due_rows('shutdown', 20000);
isnt(pass_pid(), '', 'a long pass is running');
$t0 = time;
$node->stop('fast');
cmp_ok(time - $t0, '<', 10, 'a fast shutdown in the middle of a pass is prompt');
$node->start;
set_batch_size(1000);
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'shutdown'}),
    'after a restart the worker finishes the work');

$node->stop;
done_testing();
