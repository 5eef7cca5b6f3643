# The background worker and the databases it is given.  Databases that
# are missing, lack the extension, refuse connections or are invalid are
# passed over without a word in the log; nothing happens while CREATE
# EXTENSION has not committed, and the worker starts once it has; a
# database dropped (and re-created) causes no error loop; names follow
# identifier quoting, and a malformed list is rejected; a per-database
# setting applies to the worker there.  A pass that fails is logged and
# counted, and failed passes back off (2, 4, 8 ... intervals), so a lasting
# fault, such as a trigger that raises or a table lock held past
# lock_timeout, gives a few log lines, not a loop; the worker resumes once
# the fault is gone.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('databases');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.worker_databases = 'postgres, noext, nosuchdb, gone, noconn, invalid, "Mixed Case"'
idempotency.worker_interval = '100ms'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');

my $logpos;

# A database was just made unusable for connections.  The launcher checks
# each database before it starts a pass there, but a pass it started just
# before the change connects after it, and PostgreSQL ends that connection
# at FATAL (InitPostgres; a background worker cannot read pg_database
# before it connects): at most that one line, and then silence.
sub quiet_after_change
{
    my ($expected_fatal, $what) = @_;
    usleep(1_000_000);
    my @lines = grep { $_ ne '' } split /\n/, log_errors($node, $logpos);
    my @other = grep { !/$expected_fatal/ } @lines;
    is(join("\n", @other), '', "no error for $what");
    cmp_ok(scalar(@lines) - scalar(@other), '<=', 1,
        "at most one pass, launched before the change, is refused its connection: $what");
    $logpos = -s $node->logfile;
    usleep(1_000_000);
    is(log_errors($node, $logpos), '', "and then nothing more: $what");
}

# $n completed rows in $scope of database $db, past expires_at
sub add_due_rows
{
    my ($db, $scope, $n) = @_;
    $node->safe_psql($db, qq{
        INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
        SELECT '$scope', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(),
               now() - interval '1 s'
        FROM generate_series(1, $n) i});
}

sub rows_gone
{
    my ($db, $scope) = @_;
    return $node->poll_query_until($db,
        "SELECT count(*) = 0 FROM idempotency_keys WHERE scope = '$scope'");
}

# -- a database without the extension, and a missing one: quiet
$logpos = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE noext');
usleep(1_500_000);
is(log_errors($node, $logpos), '', 'no error for a database without the extension, nor for a missing one');

# -- CREATE EXTENSION: nothing happens until it commits, then the worker works
$logpos = -s $node->logfile;
my $creator = $node->background_psql('noext');
$creator->query_safe(q{
    BEGIN;
    CREATE EXTENSION idempotency;
    INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
    SELECT 'c', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() - interval '1 s'
    FROM generate_series(1, 10) i;
});
usleep(1_000_000);
is($creator->query_safe(q{SELECT count(*) FROM idempotency_keys WHERE scope = 'c'}), '10',
    'while CREATE EXTENSION has not committed, the worker does nothing there');
is(log_errors($node, $logpos), '', 'and logs nothing');
$creator->query_safe('COMMIT');
$creator->quit;
ok(rows_gone('noext', 'c'), 'once it commits, the worker expires there');

# -- a quoted, mixed-case name
$node->safe_psql('postgres', 'CREATE DATABASE "Mixed Case"');
$node->safe_psql('Mixed Case', 'CREATE EXTENSION idempotency');
add_due_rows('Mixed Case', 'm', 10);
ok(rows_gone('Mixed Case', 'm'), 'a database listed with a quoted name is served');

# -- a per-database setting applies to the worker in that database
$node->safe_psql('postgres', q{ALTER DATABASE "Mixed Case" SET idempotency.stale_policy = 'hold'});
$node->safe_psql('Mixed Case',
    q{SELECT idem_claim('s', NULL, 'm', lease => '1 ms')});
$node->safe_psql('postgres',
    q{SELECT idem_claim('s', NULL, 'm', lease => '1 ms')});
ok($node->poll_query_until('postgres',
    q{SELECT status = 'failed' FROM idempotency_keys WHERE scope = 'm' AND key = 's'}),
    'a stale claim is expired where stale_policy is reclaim');
is($node->safe_psql('Mixed Case',
    q{SELECT status FROM idempotency_keys WHERE scope = 'm' AND key = 's'}),
    'processing', 'and held where ALTER DATABASE set it to hold');

# -- a database that refuses connections: quiet
$logpos = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE noconn');
$node->safe_psql('noconn', 'CREATE EXTENSION idempotency');
$node->safe_psql('postgres', 'ALTER DATABASE noconn ALLOW_CONNECTIONS false');
quiet_after_change(qr/FATAL:  database "noconn" is not currently accepting connections/,
    'a database with datallowconn = false');

# -- a database left invalid by an interrupted DROP DATABASE
#    (datconnlimit = -2 from 15.4 on): quiet
$node->safe_psql('postgres', 'CREATE DATABASE invalid');
$node->safe_psql('invalid', 'CREATE EXTENSION idempotency');
$logpos = -s $node->logfile;
$node->safe_psql('postgres', q{UPDATE pg_database SET datconnlimit = -2 WHERE datname = 'invalid'});
quiet_after_change(qr/FATAL:  cannot connect to invalid database "invalid"/, 'an invalid database');
$node->safe_psql('postgres', 'DROP DATABASE invalid');

# -- a dropped database: no error loop; re-created, it is served again
$node->safe_psql('postgres', 'CREATE DATABASE gone');
$node->safe_psql('gone', 'CREATE EXTENSION idempotency');
add_due_rows('gone', 'g', 10);
ok(rows_gone('gone', 'g'), 'a database is served');
$logpos = -s $node->logfile;
$node->safe_psql('postgres', 'DROP DATABASE gone');
usleep(1_000_000);
# A pass started just before the DROP may log once that its database is
# gone (or being dropped); nothing else.
my @gone = grep { !/FATAL:  (database \d+ does not exist|cannot connect to invalid database)/ }
  grep { $_ ne '' } split /\n/, log_errors($node, $logpos);
is(join("\n", @gone), '', 'DROP DATABASE succeeds under the worker, with no other error');
cmp_ok(scalar(() = log_errors($node, $logpos) =~ /FATAL/g), '<=', 1, 'its database is reported gone at most once');
$logpos = -s $node->logfile;
usleep(1_000_000);
is(log_errors($node, $logpos), '', 'and then never again');
$node->safe_psql('postgres', 'CREATE DATABASE gone');
$node->safe_psql('gone', 'CREATE EXTENSION idempotency');
add_due_rows('gone', 'g', 10);
ok(rows_gone('gone', 'g'), 'a database re-created under the same name is served');

# -- the list is checked when it is set
my ($ret, $stdout, $stderr) = $node->psql('postgres',
    q{ALTER SYSTEM SET idempotency.worker_databases = 'postgres,,noext'});
like($stderr, qr/invalid value for parameter "idempotency.worker_databases".*\n.*List syntax is invalid/,
    'a malformed list of databases is rejected');
($ret, $stdout, $stderr) = $node->psql('postgres',
    "ALTER SYSTEM SET idempotency.worker_databases = '" . join(',', map { "db$_" } 1 .. 65) . "'");
like($stderr, qr/At most 64 databases can be listed/, 'and so is a list of more than 64');

# -- a lasting fault: logged and counted, with back-off, then recovery
$node->safe_psql('postgres', q{
    SELECT idem_stats_reset();
    CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'boom from a trigger';
    END
    $$;
    CREATE TRIGGER boom BEFORE DELETE ON idempotency_keys
        FOR EACH ROW WHEN (OLD.scope = 'boom') EXECUTE FUNCTION boom();
});
$logpos = -s $node->logfile;
add_due_rows('postgres', 'boom', 1);
usleep(4_000_000);
my $booms = () = slurp_file($node->logfile, $logpos) =~ /ERROR:  boom from a trigger/g;
cmp_ok($booms, '>=', 2, "a failing pass is logged ($booms times in 4 s) and retried");
cmp_ok($booms, '<=', 8, 'failed passes back off: far fewer than the 40 intervals in 4 s');
ok($node->log_contains(qr/idempotency expiry batch in database "postgres"/, $logpos),
    'the error names the database the pass ran in');
$node->safe_psql('postgres', 'DROP TRIGGER boom ON idempotency_keys');
ok(rows_gone('postgres', 'boom'), 'once the fault is gone, the worker resumes');
$booms = () = slurp_file($node->logfile, $logpos) =~ /ERROR:  boom from a trigger/g;
is($node->safe_psql('postgres', 'SELECT worker_errors FROM idempotency_stats'), $booms,
    "every failed pass ($booms) is counted in worker_errors");
add_due_rows('postgres', 'after', 1);
ok(rows_gone('postgres', 'after'), 'and after a successful pass the back-off is over');

# -- a table lock held past lock_timeout: the pass gives up, backs off
$node->safe_psql('postgres', 'SELECT idem_stats_reset()');
$logpos = -s $node->logfile;
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE;');
usleep(4_000_000);
my $waiting = $node->safe_psql('postgres', q{
    SELECT count(*) FROM pg_stat_activity
    WHERE backend_type = 'idempotency worker' AND wait_event_type = 'Lock'
      AND now() - state_change > interval '1.5 s'});
$locker->query_safe('COMMIT');
$locker->quit;
my $timeouts = () = slurp_file($node->logfile, $logpos) =~ /ERROR:  canceling statement due to lock timeout/g;
cmp_ok($timeouts, '>=', 1, "a pass behind LOCK TABLE gives up after lock_timeout ($timeouts times in 4 s)");
cmp_ok($timeouts, '<=', 4, 'and backs off');
is($waiting, '0', 'no pass waited on the lock for longer than lock_timeout');
add_due_rows('postgres', 'unlocked', 1);
ok(rows_gone('postgres', 'unlocked'), 'once the lock is gone, the worker resumes');

# -- idempotency_admin missing (renamed by a CREATEROLE role) or made a
# superuser: the pass refuses to run as the superuser it connects as.  A
# batch that found the role before the change may still be running (as that
# role: not what this tests); a database's passes run one at a time, and
# each batch looks the role up again, so once a pass has failed on the
# change, none from before it is left: the rows are added after that.
$logpos = -s $node->logfile;
$node->safe_psql('postgres', q{
    SELECT idem_stats_reset();
    CREATE TABLE trigger_ran_as (who text, super bool);
    GRANT INSERT ON trigger_ran_as TO PUBLIC;
    CREATE FUNCTION who() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO public.trigger_ran_as
        SELECT current_user, rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user;
        RETURN OLD;
    END
    $$;
    CREATE TRIGGER who BEFORE DELETE ON idempotency_keys
        FOR EACH ROW WHEN (OLD.scope LIKE 'noadmin%') EXECUTE FUNCTION who();
    ALTER ROLE idempotency_admin RENAME TO renamed_admin;
});
$node->wait_for_log(qr/ERROR:  role "idempotency_admin" does not exist/, $logpos);
$logpos = -s $node->logfile;
add_due_rows('postgres', 'noadmin', 1);
usleep(3_000_000);
ok($node->log_contains(qr/ERROR:  role "idempotency_admin" does not exist/, $logpos),
    'without idempotency_admin the pass fails, and says why');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency_keys WHERE scope = 'noadmin'}), '1',
    'nothing is expired');
is($node->safe_psql('postgres', 'SELECT count(*) FROM trigger_ran_as'), '0',
    'no trigger ran (before the fix it ran as the bootstrap superuser)');
cmp_ok($node->safe_psql('postgres', 'SELECT worker_errors FROM idempotency_stats'), '>=', 1,
    'the failed pass is counted');
$node->safe_psql('postgres', 'ALTER ROLE renamed_admin RENAME TO idempotency_admin');
ok(rows_gone('postgres', 'noadmin'), 'with the role back, the worker resumes');
is($node->safe_psql('postgres', 'SELECT who || super FROM trigger_ran_as'), 'idempotency_adminfalse',
    'and the trigger runs as idempotency_admin, not a superuser');
$logpos = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER ROLE idempotency_admin SUPERUSER');
$node->wait_for_log(qr/ERROR:  role "idempotency_admin" must not be a superuser/, $logpos);
$logpos = -s $node->logfile;
add_due_rows('postgres', 'noadmin-super', 1);
usleep(3_000_000);
ok($node->log_contains(qr/ERROR:  role "idempotency_admin" must not be a superuser/, $logpos),
    'an idempotency_admin made superuser is refused too');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency_keys WHERE scope = 'noadmin-super'}), '1',
    'and nothing is expired');
$node->safe_psql('postgres', 'ALTER ROLE idempotency_admin NOSUPERUSER');
ok(rows_gone('postgres', 'noadmin-super'), 'until it is an ordinary role again');
$node->safe_psql('postgres', 'DROP TRIGGER who ON idempotency_keys');

# -- CREATE EXTENSION ... SCHEMA x: the roles need USAGE on x (README,
# "Installing"); until they have it every pass fails, and says why
$node->safe_psql('postgres', 'CREATE DATABASE nosuchdb');
$node->safe_psql('nosuchdb', 'CREATE SCHEMA x; CREATE EXTENSION idempotency SCHEMA x');
$logpos = -s $node->logfile;
$node->safe_psql('nosuchdb', q{
    INSERT INTO x.idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
    VALUES ('s', 'k', 'completed', nextval('x.idempotency_token_seq'), now(), now(), now() - interval '1 s')});
usleep(2_000_000);
ok($node->log_contains(qr/ERROR:  permission denied for schema x/, $logpos),
    'an extension in a schema the roles cannot use: the pass fails and says why');
$node->safe_psql('nosuchdb', 'GRANT USAGE ON SCHEMA x TO idempotency_app');
ok($node->poll_query_until('nosuchdb', 'SELECT count(*) = 0 FROM x.idempotency_keys'),
    'with USAGE granted to idempotency_app, the worker expires there');

# -- the worker's counters are kept in the database it worked in
$node->safe_psql('postgres', 'SELECT idem_stats_reset()');
$node->safe_psql('nosuchdb', 'SELECT x.idem_stats_reset()');
add_due_rows('postgres', 'counted', 3);
$node->safe_psql('nosuchdb', q{
    INSERT INTO x.idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
    SELECT 'counted', 'k' || i, 'completed', nextval('x.idempotency_token_seq'), now(), now(),
           now() - interval '1 s'
    FROM generate_series(1, 2) i});
ok(rows_gone('postgres', 'counted'), 'rows due in postgres are deleted');
ok($node->poll_query_until('nosuchdb', q{SELECT count(*) = 0 FROM x.idempotency_keys WHERE scope = 'counted'}),
    'and in the other database');
is($node->safe_psql('postgres', 'SELECT rows_deleted FROM idempotency_stats'), '3',
    "postgres's idempotency_stats counts the rows the worker deleted there");
is($node->safe_psql('nosuchdb', 'SELECT rows_deleted FROM x.idempotency_stats'), '2',
    "the other database's counts its own");
ok($node->poll_query_until('postgres', q{SELECT bool_and(worker_passes > 0) FROM idem_stats_databases()
    WHERE datname IN ('postgres', 'nosuchdb') HAVING count(*) = 2}),
    'idem_stats_databases() shows the worker passing in each database');

$node->stop;
done_testing();
