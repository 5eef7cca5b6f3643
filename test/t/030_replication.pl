# Streaming replication and failover.
#
# What it promises: keys travel in the same WAL commit as the payment, so a
# standby never has one without the other.  With synchronous_commit =
# remote_apply (a synchronous standby), every claim or result the primary
# acknowledged is on the standby when it is promoted.  With asynchronous
# replication, the last acknowledged transactions can be lost on failover
# together with their payments: the client's retry with the same key then
# gets "new" and the payment is made again once -- never twice, since the
# first one was lost with its key.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemTest;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$primary->start;
$primary->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	CREATE TABLE payments (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
});
$primary->backup('b');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;

# A payment in the in-transaction pattern
sub pay
{
	my ($node, $key) = @_;
	my $out = $node->safe_psql('postgres', qq{
		BEGIN;
		SELECT outcome FROM idem_claim('$key', '{"amount": 100}', 'm') \\gset
		SELECT :'outcome' = 'new' AS is_new \\gset
		\\if :is_new
		INSERT INTO payments (key, amount) VALUES ('$key', 100) RETURNING id AS payment_id \\gset
		SELECT idem_complete('$key', 201, jsonb_build_object('payment_id', :payment_id), 'm');
		\\endif
		COMMIT;
		SELECT :'outcome';
	});
	return (split /\n/, $out)[-1];    # the outcome, after idem_complete's empty row
}

# -- claims and results replicate
is(pay($primary, 'k1'), 'new', 'a payment on the primary');
$primary->safe_psql('postgres', q{SELECT idem_claim('cross', NULL, 'm', lease => '1 hour')});
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres',
	q{SELECT status || ' ' || response_code FROM idem_lookup('k1', 'm')}),
	'completed 201', 'the completed key is on the standby');
is($standby->safe_psql('postgres',
	q{SELECT count(*) FROM payments p JOIN idempotency_keys k ON k.key = p.key AND (k.response->>'payment_id')::bigint = p.id}),
	'1', 'with its payment');
is($standby->safe_psql('postgres', q{SELECT status FROM idem_lookup('cross', 'm')}),
	'processing', 'a committed claim is on the standby');

# -- tenant isolation (docs/security.md) holds on the standby: a tenant
# reading there sees only its own scope
$primary->safe_psql('postgres', tenant_recipe('m2'));
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SET ROLE m2;
	SELECT count(*) FROM idempotency_keys WHERE scope = 'm';
	SELECT count(*) FROM idem_lookup('k1', 'm');}),
	"0\n0", 'on the standby a tenant sees no other scope\'s keys');
$primary->safe_psql('postgres', q{
	DELETE FROM idempotency_row_security;
	DROP POLICY tenant_scope ON idempotency_keys;
	DROP POLICY admin_all ON idempotency_keys;
	ALTER TABLE idempotency_keys NO FORCE ROW LEVEL SECURITY;
	ALTER TABLE idempotency_keys DISABLE ROW LEVEL SECURITY;});

# -- a claim on the standby is refused as read-only, lookups work
my ($ret, $out, $err) = $standby->psql('postgres',
	q{SELECT * FROM idem_claim('k2', NULL, 'm')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
isnt($ret, 0, 'a claim on the standby fails');
like($err, qr/25006: cannot execute idem_claim\(\) in a read-only transaction/,
	'with SQLSTATE 25006 and a clear message');
($ret, $out, $err) = $standby->psql('postgres',
	q{SELECT * FROM idem_execute('k2', NULL, 'm', 201, 'SELECT 1')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/25006/, 'idem_execute on the standby fails with 25006 too');

# -- synchronous standby: nothing acknowledged is lost on failover
$primary->append_conf('postgresql.conf', q{
synchronous_standby_names = 'standby'
synchronous_commit = remote_apply
});
$primary->reload;
$primary->poll_query_until('postgres',
	"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby'");
my $acked = 0;
for my $i (1 .. 100)
{
	$acked++ if pay($primary, "sync-$i") eq 'new';
}
is($acked, 100, '100 payments acknowledged by the primary');
$primary->stop('immediate');
$standby->promote;

is($standby->safe_psql('postgres',
	q{SELECT count(*) FROM idempotency_keys WHERE key LIKE 'sync-%' AND status = 'completed'}),
	'100', 'after promotion every acknowledged key is there, completed');
is($standby->safe_psql('postgres',
	q{SELECT count(*) FROM payments WHERE key LIKE 'sync-%'}),
	'100', 'and every payment');

# -- after promotion: completed keys replay, none can be claimed twice
my $replays = 0;
for my $i (1 .. 100)
{
	$replays++ if pay($standby, "sync-$i") eq 'replay';
}
is($replays, 100, 'every completed key replays on the promoted standby');
is($standby->safe_psql('postgres', q{SELECT count(*) FROM payments WHERE key LIKE 'sync-%'}),
	'100', 'and no payment was made twice');
is($standby->safe_psql('postgres',
	q{SELECT outcome FROM idem_claim('cross', NULL, 'm')}),
	'in_progress', 'a claim in flight before the failover is still held (its lease lives)');
is(pay($standby, 'after'), 'new', 'new keys can be claimed on the promoted standby');

$standby->stop;
done_testing();
