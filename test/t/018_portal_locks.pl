# Key locks taken by a portal of the extended protocol that is suspended and
# resumed across savepoints rolled back (test/portal_locks.pl speaks the
# protocol): each rollback lets go of the key locks taken under it, and the
# transaction never holds more than 64.  As a tenant of docs/tenants.md's row
# level security recipe, on a server without shared_preload_libraries (the
# default configuration), in a database not named postgres.  The SQL
# edition runs the same script (test/edition/regress.sh).
use strict;
use warnings;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('portal_locks');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE payments');
$node->safe_psql('payments', q{
    CREATE EXTENSION idempotency;
    CREATE ROLE merchant_a LOGIN IN ROLE idempotency_app;
    ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
    CREATE POLICY tenant_scope ON idempotency_keys TO idempotency_app
        USING (scope = current_user) WITH CHECK (scope = current_user);
    SELECT idem_save_row_security();
});
my ($out, $err) = run_command([ 'perl', "$FindBin::RealBin/../portal_locks.pl",
    $node->host, $node->port, 'merchant_a', 'payments', '7653' ]);
is($err, '', 'the protocol script ran without an error');
like($out, qr/^ok portal_locks\/rolled_back$/m, 'a savepoint rolled back lets go of the key locks a suspended portal took under it');
like($out, qr/^ok portal_locks\/cap$/m, 'the portal holds at most 64 key locks');
unlike($out, qr/^not ok/m, 'no check failed') or diag($out);
$node->stop;
done_testing();
