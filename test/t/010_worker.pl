# The background worker at work: it shows in pg_stat_activity; it makes
# stale claims takeover-ready, deletes due rows and leaves live ones, and
# counts what it did; it honours stale_policy; it runs its statements as
# idempotency_admin in a security-restricted operation; it skips rows that
# other transactions hold or have not committed, without waiting; and it
# re-reads its batch size and interval on SIGHUP.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('worker');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.worker_databases = 'postgres'
idempotency.worker_interval = '100ms'
idempotency.worker_batch_size = 1000
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');

# $n completed rows in $scope (keys k1..kn) expiring at $expires
sub add_rows
{
    my ($scope, $n, $expires) = @_;
    $node->safe_psql('postgres', qq{
        INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at,
                                      expires_at, response_code, response)
        SELECT '$scope', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(),
               $expires, 200, '{}'
        FROM generate_series(1, $n) i});
}

# Set a worker GUC and reload; return once the passes that started before
# the reload are over (two more passes finished), when passes are running.
sub set_worker
{
    my ($name, $value, $passes_run) = @_;
    set_worker_setting($node, $name, $value);
    wait_passes($node, 2) if $passes_run // 1;
}

my $logpos = 0;

# -- it runs, and shows itself
ok($node->poll_query_until('postgres', q{
    SELECT count(*) = 1 FROM pg_stat_activity
    WHERE backend_type = 'idempotency launcher' AND application_name = 'idempotency launcher'
      AND datname IS NULL}),
    'the launcher shows in pg_stat_activity as "idempotency launcher", in no database');
ok($node->poll_query_until('postgres', q{
    SELECT worker_passes > 0 AND worker_last_pass > now() - interval '1 minute'
    FROM idempotency_stats}),
    'passes are made and counted, with the time of the last one');

# -- stale claims become takeover-ready, due rows go, live rows stay
$node->safe_psql('postgres', q{
    SELECT idem_stats_reset();
    SELECT count(*) FROM generate_series(1, 30) i, idem_claim('stale-' || i, NULL, 'w', lease => '1 ms');
    SELECT count(*) FROM generate_series(1, 30) i, idem_claim('live-' || i, NULL, 'w');
});
add_rows('w', 40, "now() - interval '1 s'");
add_rows('w-live', 40, "now() + interval '1 day'");
ok($node->poll_query_until('postgres', q{
    SELECT count(*) FILTER (WHERE key LIKE 'k%') = 0
       AND count(*) FILTER (WHERE key LIKE 'stale-%' AND status = 'failed' AND retryable) = 30
    FROM idempotency_keys WHERE scope = 'w'}),
    'stale claims made takeover-ready and due rows deleted');
is($node->safe_psql('postgres', q{
    SELECT count(*) FILTER (WHERE scope = 'w' AND key LIKE 'live-%' AND status = 'processing')
        || ' ' || count(*) FILTER (WHERE scope = 'w-live')
    FROM idempotency_keys}),
    '30 40', 'live claims and rows not yet due are untouched');
is($node->safe_psql('postgres',
    q{SELECT leases_expired || ' ' || rows_deleted || ' ' || worker_errors FROM idempotency_stats}),
    '30 40 0', 'idempotency_stats counts what the worker did, and no error');
is($node->safe_psql('postgres', q{SELECT outcome FROM idem_claim('stale-1', NULL, 'w')}),
    'reclaimed', 'an expired claim is taken over by the next claim');

# -- stale_policy = 'hold': stale claims and their rows are left for an operator
set_worker('stale_policy', 'hold');
$node->safe_psql('postgres', q{
    SELECT count(*) FROM generate_series(1, 5) i, idem_claim('held-' || i, NULL, 'p', lease => '1 ms', retention => '1 ms');
});
add_rows('p', 5, "now() - interval '1 s'");
ok($node->poll_query_until('postgres',
    q{SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'p' AND key LIKE 'k%'}),
    'under hold, due completed rows are still deleted');
usleep(500_000);
is($node->safe_psql('postgres',
    q{SELECT count(*) FROM idempotency_keys WHERE scope = 'p' AND key LIKE 'held-%' AND status = 'processing'}),
    '5', 'under hold, stale claims stay processing, past expires_at too');
set_worker('stale_policy', 'reclaim');
ok($node->poll_query_until('postgres',
    q{SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'p'}),
    'back to reclaim after a reload, they are expired and then deleted');

# -- least privilege: the batch runs as idempotency_admin and cannot become
#    the superuser it connected as; and with search_path set as the
#    functions set it for their own statements
$node->safe_psql('postgres', q{
    CREATE TABLE worker_seen (role_name text, session_role text, set_role text, temp_table text,
                              search_path text);
    GRANT INSERT ON worker_seen TO PUBLIC;
    CREATE FUNCTION note_worker() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        set_role text;
        temp_table text;
    BEGIN
        BEGIN
            EXECUTE format('SET ROLE %I', session_user);
            set_role := 'became ' || current_user;
        EXCEPTION WHEN OTHERS THEN
            set_role := SQLERRM;
        END;
        BEGIN
            CREATE TEMP TABLE worker_temp (i int);
            temp_table := 'created';
        EXCEPTION WHEN OTHERS THEN
            temp_table := SQLERRM;
        END;
        INSERT INTO public.worker_seen
        VALUES (current_user, session_user, set_role, temp_table, pg_catalog.current_schemas(true)::text);
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER note_worker AFTER DELETE ON idempotency_keys
        FOR EACH ROW WHEN (OLD.scope = 'priv') EXECUTE FUNCTION note_worker();
});
add_rows('priv', 1, "now() - interval '1 s'");
ok($node->poll_query_until('postgres', 'SELECT count(*) = 1 FROM worker_seen'),
    'a trigger saw the worker delete a row');
my $superuser = $node->safe_psql('postgres', 'SELECT rolname FROM pg_authid WHERE oid = 10');
is($node->safe_psql('postgres', 'SELECT role_name, session_role FROM worker_seen'),
    "idempotency_admin|$superuser",
    'the worker connects as the bootstrap superuser but runs the batch as idempotency_admin');
like($node->safe_psql('postgres', 'SELECT set_role FROM worker_seen'),
    qr/cannot set parameter "role" within security-definer function/,
    'code run by the batch cannot SET ROLE back to the superuser');
like($node->safe_psql('postgres', 'SELECT temp_table FROM worker_seen'),
    qr/cannot create temporary table within security-restricted operation/,
    'and runs in a security-restricted operation');
is($node->safe_psql('postgres', 'SELECT search_path FROM worker_seen'), '{pg_catalog}',
    'the batch runs with search_path pg_catalog, pg_temp (a worker has no temporary schema)');
$node->safe_psql('postgres', 'DROP TRIGGER note_worker ON idempotency_keys');

# -- rows another transaction holds, or has not committed, are skipped
#    without waiting
$logpos = -s $node->logfile;
set_worker('worker_databases', '', 0);
add_rows('busy', 3, "now() - interval '1 s'");
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{
    BEGIN;
    SELECT 1 FROM idempotency_keys WHERE scope = 'busy' AND key = 'k1' FOR UPDATE;
    SELECT outcome FROM idem_claim('open', NULL, 'busy', lease => '1 ms', retention => '1 ms');
});
set_worker('worker_databases', 'postgres');
ok($node->poll_query_until('postgres',
    q{SELECT string_agg(key, ',') = 'k1' FROM idempotency_keys WHERE scope = 'busy'}),
    'due rows nobody holds are deleted');
my $passes = $node->safe_psql('postgres', 'SELECT worker_passes FROM idempotency_stats');
ok($node->poll_query_until('postgres', "SELECT worker_passes > $passes + 3 FROM idempotency_stats"),
    'passes go on while a due row is locked: the worker does not wait for it');
is($node->safe_psql('postgres',
    q{SELECT count(*) FROM idempotency_keys WHERE scope = 'busy' AND key = 'k1'}),
    '1', 'the locked due row is left alone');
is($holder->query_safe(
    q{SELECT status FROM idempotency_keys WHERE scope = 'busy' AND key = 'open'}),
    'processing', 'an uncommitted claim whose lease ran out is left alone');
$holder->query_safe('COMMIT');
$holder->quit;
ok($node->poll_query_until('postgres',
    q{SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'busy'}),
    'once committed, both are expired and deleted');
is(log_errors($node, $logpos), '', 'no error in the log: nothing waited for a lock');

# -- SIGHUP: a new batch size
set_worker('worker_batch_size', '7');
$node->safe_psql('postgres', 'SELECT idem_stats_reset()');
add_rows('h', 50, "now() - interval '1 s'");
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM idempotency_keys WHERE scope = 'h'}),
    'after a reload, due rows are deleted');
is($node->safe_psql('postgres', 'SELECT max_batch_rows FROM idempotency_stats'), '7',
    'in batches of the new worker_batch_size');

# -- SIGHUP: a new interval, taken at once
set_worker('worker_interval', '1h', 0);
ok($node->poll_query_until('postgres',
    q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'idempotency worker'}),
    'the pass running at the reload ends');
$passes = $node->safe_psql('postgres', 'SELECT worker_passes FROM idempotency_stats');
usleep(1_000_000);
cmp_ok($node->safe_psql('postgres', 'SELECT worker_passes FROM idempotency_stats'), '<=', $passes + 1,
    'with worker_interval = 1h, passes stop');
my $t0 = time;
$node->safe_psql('postgres', q{ALTER SYSTEM SET idempotency.worker_interval = '100ms'});
$node->reload;
ok($node->poll_query_until('postgres', "SELECT worker_passes > $passes + 2 FROM idempotency_stats"),
    'back to 100ms, passes resume');
cmp_ok(time - $t0, '<', 10, 'at once, not after the hour it was waiting for');

is($node->safe_psql('postgres', 'SELECT worker_errors FROM idempotency_stats'), '0',
    'no pass failed');
$node->stop;
done_testing();
