# A tenant (a member of idempotency_app under the row level security recipe
# of docs/tenants.md) cannot stall other tenants' claims by asking for a
# lock on idempotency_keys stronger than ROW EXCLUSIVE.  PostgreSQL queues
# some of those locks before it checks privileges; src/guard.c refuses
# those statements first (42501).  Every statement here runs as tenant A
# while another session holds a claim open (ROW EXCLUSIVE on the table), with
# lock_timeout set: a statement that queued its lock would end in a lock
# timeout instead of the guard's error.  The statements that PostgreSQL
# checks before locking must answer at once too.  Then, end to end: A's
# CREATE RULE, CREATE TRIGGER and foreign key (the reported attacks) are
# refused while B goes on claiming.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('guard');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION idempotency;
    ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
    CREATE POLICY tenant_scope ON idempotency_keys TO idempotency_app
        USING (scope = current_user) WITH CHECK (scope = current_user);
    SELECT idem_save_row_security();
    CREATE ROLE tenant_a LOGIN IN ROLE idempotency_app;
    CREATE ROLE tenant_b LOGIN IN ROLE idempotency_app;
    CREATE TRIGGER keep BEFORE UPDATE ON idempotency_keys FOR EACH ROW
        EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger();
    CREATE RULE keep_rule AS ON DELETE TO idempotency_keys WHERE false DO ALSO NOTHING;
    CREATE TABLE public.own_pub (s text, k text);
    ALTER TABLE public.own_pub OWNER TO tenant_a;
});
# 19 parses CLUSTER, VACUUM FULL and its new REPACK into one statement
my $repack = $node->pg_version >= 19;

# A claim held open by tenant B: ROW EXCLUSIVE on the table until COMMIT.
my $holder = $node->background_psql('postgres', extra_params => ['-U', 'tenant_b']);
$holder->query_safe(q{BEGIN; SELECT idem_claim('held', NULL, 'tenant_b')});

# Run statements as tenant A in one session, the last one the statement
# under test; returns (stderr, seconds).
sub as_tenant_a
{
    my ($setup, $stmt) = @_;
    my $start = time;
    my ($rc, $out, $err) = $node->psql('postgres',
        "SET lock_timeout = '5s';\n$setup\n$stmt;",
        extra_params => ['-U', 'tenant_a', '-v', 'ON_ERROR_STOP=1']);
    return ($err, time - $start);
}

my $own = 'CREATE TEMP TABLE own (s text, k text);';
my $parted = 'CREATE TEMP TABLE parted (LIKE idempotency_keys) PARTITION BY LIST (scope);';
my @guarded = (
    ['', 'LOCK TABLE idempotency_keys IN SHARE MODE'],
    ['', 'LOCK TABLE idempotency_keys IN SHARE UPDATE EXCLUSIVE MODE'],
    ['CREATE TEMP VIEW v AS SELECT * FROM idempotency_keys;', 'LOCK TABLE v IN ACCESS EXCLUSIVE MODE'],
    ['', 'CREATE RULE r AS ON INSERT TO idempotency_keys DO ALSO NOTHING'],
    ['', 'CREATE TRIGGER t BEFORE INSERT ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger()'],
    ['', 'CREATE OR REPLACE TRIGGER keep BEFORE UPDATE ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger()'],
    ['', 'DROP TRIGGER IF EXISTS nosuch ON idempotency_keys'],
    ['', 'DROP TRIGGER keep ON idempotency_keys'],
    ['', 'DROP RULE IF EXISTS nosuch ON idempotency_keys'],
    ['', 'DROP POLICY IF EXISTS nosuch ON idempotency_keys'],
    ['', 'ALTER TRIGGER keep ON idempotency_keys DEPENDS ON EXTENSION idempotency'],
    ['', 'ALTER INDEX idempotency_keys_pkey DEPENDS ON EXTENSION idempotency'],
    ['', q{COMMENT ON TABLE idempotency_keys IS 'x'}],
    ['', q{COMMENT ON COLUMN idempotency_keys.key IS 'x'}],
    ['', q{COMMENT ON CONSTRAINT idempotency_keys_pkey ON idempotency_keys IS 'x'}],
    ['', q{COMMENT ON TRIGGER keep ON idempotency_keys IS 'x'}],
    ['', q{COMMENT ON RULE keep_rule ON idempotency_keys IS 'x'}],
    ['', q{COMMENT ON POLICY tenant_scope ON idempotency_keys IS 'x'}],
    ['', q{COMMENT ON INDEX idempotency_keys_pkey IS 'x'}],
    ['', 'CREATE TEMP TABLE f (s text, k text, FOREIGN KEY (s, k) REFERENCES idempotency_keys)'],
    ['', 'CREATE TEMP TABLE f (s text, k text REFERENCES idempotency_keys (key))'],
    ['', 'CREATE TEMP TABLE f (s text, k text, CONSTRAINT fk FOREIGN KEY (s, k) REFERENCES idempotency_keys NOT VALID)'],
    [$own, 'ALTER TABLE own ADD FOREIGN KEY (s, k) REFERENCES idempotency_keys'],
    [$own, 'ALTER TABLE own ADD COLUMN k2 text REFERENCES idempotency_keys (key)'],
    ['', 'CREATE TEMP TABLE ch () INHERITS (idempotency_keys)'],
    [$parted, 'ALTER TABLE parted ATTACH PARTITION idempotency_keys FOR VALUES IN (\'x\')'],
    [$parted, 'ALTER TABLE parted DETACH PARTITION idempotency_keys'],
    [$parted, 'ALTER TABLE parted DETACH PARTITION idempotency_keys CONCURRENTLY'],
    [$own, 'ALTER TABLE own INHERIT idempotency_keys'],
    [$own, 'ALTER TABLE own NO INHERIT idempotency_keys'],
    ['', 'CREATE STATISTICS st ON scope, key FROM idempotency_keys'],
    # its own table in the table's schema, clustered on the table's index
    ['', 'CLUSTER own_pub USING idempotency_keys_pkey'],
    ($repack ? (['', 'REPACK own_pub USING INDEX idempotency_keys_pkey']) : ()),
    ['', 'CREATE PUBLICATION pub FOR TABLE idempotency_keys'],
    # through a function: DDL it runs goes through the same hook
    ['CREATE FUNCTION pg_temp.ddl() RETURNS void LANGUAGE plpgsql AS $$ BEGIN CREATE RULE r AS ON INSERT TO idempotency_keys DO ALSO NOTHING; END $$;',
     'SELECT pg_temp.ddl()'],
);
for my $case (@guarded)
{
    my ($setup, $stmt) = @$case;
    my ($err, $took) = as_tenant_a($setup, $stmt);
    like($err, qr/ERROR:  permission denied to lock idempotency_keys in [A-Z ]+ mode/,
        "refused before any lock is queued: $stmt");
    cmp_ok($took, '<', 5, "  and at once, not after lock_timeout: $stmt");
}

# PostgreSQL checks these before it locks: they fail (or are skipped) at
# once, without the guard.
my @checked_first = (
    'LOCK TABLE idempotency_keys IN ROW EXCLUSIVE MODE',
    'ALTER TABLE idempotency_keys ADD COLUMN x int',
    'ALTER TABLE idempotency_keys DISABLE ROW LEVEL SECURITY',
    'ALTER TABLE idempotency_keys OWNER TO tenant_a',
    'ALTER TABLE idempotency_keys RENAME TO x',
    'ALTER TABLE idempotency_keys RENAME CONSTRAINT idempotency_keys_pkey TO x',
    'ALTER TABLE idempotency_keys RENAME COLUMN key TO x',
    'ALTER INDEX idempotency_keys_pkey RENAME TO x',
    'ALTER INDEX idempotency_keys_pkey SET (fillfactor = 50)',
    'ALTER TRIGGER keep ON idempotency_keys RENAME TO x',
    'ALTER RULE keep_rule ON idempotency_keys RENAME TO x',
    'DROP TABLE idempotency_keys',
    'DROP INDEX idempotency_keys_pkey',
    'TRUNCATE idempotency_keys',
    'CREATE INDEX ON idempotency_keys (key)',
    'REINDEX TABLE idempotency_keys',
    'REINDEX INDEX idempotency_keys_pkey',
    'CLUSTER idempotency_keys USING idempotency_keys_pkey',
    'VACUUM FULL idempotency_keys',
    ($repack ? ('REPACK idempotency_keys', 'REPACK idempotency_keys USING INDEX idempotency_keys_pkey',
        'REPACK (CONCURRENTLY) idempotency_keys') : ()),
    'ANALYZE idempotency_keys',
    'CREATE POLICY p ON idempotency_keys USING (true)',
    'ALTER POLICY tenant_scope ON idempotency_keys USING (true)',
    'ALTER POLICY tenant_scope ON idempotency_keys RENAME TO x',
    'GRANT ALL ON idempotency_keys TO tenant_a',
    'SELECT * FROM idempotency_keys FOR UPDATE',
);
for my $stmt (@checked_first)
{
    my ($err, $took) = as_tenant_a('', $stmt);
    unlike($err, qr/lock timeout/, "answered without waiting for a lock: $stmt");
}

# End to end: A asks, without any lock_timeout, while B keeps claiming.
for my $stmt ('CREATE RULE r AS ON INSERT TO idempotency_keys DO ALSO NOTHING',
    'CREATE TRIGGER t BEFORE INSERT ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger()',
    'CREATE TEMP TABLE f (s text, k text, FOREIGN KEY (s, k) REFERENCES idempotency_keys)')
{
    my $attacker = $node->background_psql('postgres', extra_params => ['-U', 'tenant_a'],
        on_error_stop => 0);
    $attacker->query_until(qr/sent/, "\\echo sent\n$stmt;\n");
    # A's statement has either been answered or is queued behind the held claim
    $node->poll_query_until('postgres', q{
        SELECT count(*) = 1 FROM pg_stat_activity
        WHERE usename = 'tenant_a' AND (wait_event_type = 'Lock' OR state = 'idle')});
    my ($rc, $out, $err) = $node->psql('postgres',
        q{SET statement_timeout = '10s'; SELECT outcome FROM idem_claim(md5(random()::text), NULL, 'tenant_b')},
        extra_params => ['-U', 'tenant_b']);
    is($out, 'new', "B claims while A tries: $stmt");
    $attacker->quit;
}

# The owner (here a superuser) and idempotency_admin may still take them.
$node->safe_psql('postgres', q{
    CREATE ROLE operator LOGIN IN ROLE idempotency_admin;
});
my ($rc, $out, $err) = $node->psql('postgres',
    q{SET lock_timeout = '100ms'; BEGIN; LOCK TABLE idempotency_keys IN SHARE MODE; COMMIT;},
    extra_params => ['-U', 'operator']);
like($err, qr/lock timeout/, 'a member of idempotency_admin may ask for the lock (and waits for the held claim)');

$holder->query_safe('COMMIT');
$holder->quit;
is($node->safe_psql('postgres', q{SELECT outcome FROM idem_claim('held', NULL, 'tenant_b')}), 'in_progress',
    'the held claim committed normally');
$node->safe_psql('postgres', q{COMMENT ON TABLE idempotency_keys IS 'keys'});
is($node->safe_psql('postgres', q{SELECT obj_description('idempotency_keys'::regclass)}), 'keys',
    'the owner comments on the table as before');

$node->stop;
done_testing();
