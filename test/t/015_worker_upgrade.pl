# The background worker and pg_upgrade: with idempotency preloaded in both
# clusters, no launcher or pass runs while pg_upgrade drives the servers
# in binary-upgrade mode; in the upgraded cluster the worker starts and
# expires the rows that came across, leaving live rows alone.
use strict;
use warnings;
use File::Find;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemTest;

my $conf = q{
shared_preload_libraries = 'idempotency'
idempotency.worker_interval = '100ms'
};

my $old = PostgreSQL::Test::Cluster->new('old');
$old->init;
$old->append_conf('postgresql.conf', $conf . "idempotency.worker_databases = ''\n");
$old->start;
$old->safe_psql('postgres', q{
    CREATE EXTENSION idempotency;
    INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
    SELECT 'due', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() - interval '1 s'
    FROM generate_series(1, 10) i;
    INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
    SELECT 'live', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() + interval '1 day'
    FROM generate_series(1, 10) i;
});
# tenant isolation (docs/tenants.md), which pg_upgrade must keep
$old->safe_psql('postgres', tenant_recipe('tenant_a'));
$old->stop;

my $new = PostgreSQL::Test::Cluster->new('new');
$new->init;
$new->append_conf('postgresql.conf', $conf . "idempotency.worker_databases = 'postgres'\n");

my $bindir = $new->config_data('--bindir');
chdir $PostgreSQL::Test::Utils::tmp_check;
command_ok(
    [
        'pg_upgrade', '--no-sync', '--retain',
        '-d', $old->data_dir, '-D', $new->data_dir,
        '-b', $bindir, '-B', $bindir,
        '-s', $new->host, '-p', $old->port, '-P', $new->port
    ],
    'pg_upgrade with idempotency preloaded in both clusters');

# The logs of the servers pg_upgrade ran in binary-upgrade mode
my $upgrade_logs = '';
find(sub { $upgrade_logs .= slurp_file($_) if /\.log$/ },
    $new->data_dir . '/pg_upgrade_output.d');
like($upgrade_logs, qr/binary_upgrade|pg_restore|pg_dump/,
    'the upgrade logs were kept and read');
unlike($upgrade_logs, qr/idempotency launcher started|idempotency (launcher|worker)/,
    'no launcher or pass ran during binary upgrade');

$new->start;
ok($new->poll_query_until('postgres',
    q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'}),
    'in the upgraded cluster the launcher starts');
ok($new->poll_query_until('postgres',
    q{SELECT count(*) FILTER (WHERE scope = 'due') = 0 AND count(*) FILTER (WHERE scope = 'live') = 10
      FROM idempotency_keys}),
    'and the worker expires the rows that came across, leaving live ones');

# tenant isolation came across: tenant A sees no other scope's keys, and
# cannot claim one
is($new->safe_psql('postgres', q{SELECT relrowsecurity AND relforcerowsecurity FROM pg_class WHERE relname = 'idempotency_keys'}),
    't', 'row level security is on after pg_upgrade');
my ($rc, $out, $err) = $new->psql('postgres', q{SET ROLE tenant_a;
    SELECT 'seen ' || count(*) FROM idempotency_keys;
    SELECT outcome FROM idem_claim('k1', NULL, 'live');});
like("$out|$err", qr/^seen 0\|.*new row violates row-level security policy/s,
    'after pg_upgrade a tenant sees no other scope and cannot claim its keys');

$new->stop;
done_testing();
