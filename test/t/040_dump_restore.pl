# pg_dump and restore keep every key: rows in every state, byte for byte,
# and the token sequence's position, so a restored database never hands out
# a token twice.  Custom format with pg_restore, and plain format with psql.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemTest;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', 'CREATE EXTENSION idempotency;' . keys_in_every_state());

my $rows = q{SELECT string_agg(k::text, E'\n' ORDER BY scope, key) FROM idempotency_keys k};
my $before = $node->safe_psql('src', $rows);
my $max_token = $node->safe_psql('src', 'SELECT max(token) FROM idempotency_keys');
is($node->safe_psql('src', 'SELECT count(*) FROM idempotency_keys'), '6', 'six keys in every state');

my $dump = $node->basedir . '/src.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('src') ],
	'pg_dump -Fc');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('restored'), $dump ], 'pg_restore');

my $plain = $node->basedir . '/src.sql';
$node->command_ok([ 'pg_dump', '-f', $plain, '-d', $node->connstr('src') ], 'pg_dump plain');
$node->safe_psql('postgres', 'CREATE DATABASE restored_plain');
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', $plain, '-d', $node->connstr('restored_plain') ],
	'psql restores the plain dump');

foreach my $db ('restored', 'restored_plain')
{
	is($node->safe_psql($db, $rows), $before, "$db: every key row is identical");
	cmp_ok($node->safe_psql($db, q{SELECT token FROM idem_claim('fresh', NULL, 'm9')}),
		'>', $max_token, "$db: a new claim gets a token larger than every restored one");
	is($node->safe_psql($db,
		q{SELECT outcome || ' ' || response_code || ' ' || response FROM idem_claim('completed', '{"amount": 300}', 'm1')}),
		'replay 201 {"note": "é ✓", "payment_id": 1}', "$db: a completed key replays its response");
	is($node->safe_psql($db,
		q{SELECT outcome || ' ' || response_code FROM idem_claim('declined', NULL, 'm2')}),
		'replay 402', "$db: a failed key replays its error");
	is($node->safe_psql($db,
		q{SELECT outcome || ' ' || recovery_point FROM idem_claim('stale', NULL, 'm1')}),
		'reclaimed card-authorized', "$db: a stale claim is taken over with its recovery point");
	is($node->safe_psql($db,
		q{SELECT outcome FROM idem_claim('processing', '{"amount": 1}', 'm1')}),
		'in_progress', "$db: a live claim is still in progress");
	is($node->safe_psql($db,
		q{SELECT outcome FROM idem_execute('exec', '{"amount": 5}', 'm3', 201, 'INSERT INTO payments (key, amount) VALUES ($1, $2)', 'exec', 5)}),
		'replay', "$db: idem_execute replays");
	is($node->safe_psql($db, q{SELECT count(*) FROM payments}), '2', "$db: no payment was made again");
	is($node->safe_psql($db,
		q{SELECT has_function_privilege('idempotency_app', 'idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer)', 'EXECUTE')
		     AND NOT has_function_privilege('public', 'idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer)', 'EXECUTE')}),
		't', "$db: privileges are kept");
}

# Tenant isolation survives every dump and restore: the recipe of
# docs/security.md (row level security, one scope per role), saved with
# idem_save_row_security(); after the restore, tenant A attacks B's keys.
$node->safe_psql('postgres', 'CREATE DATABASE tenants');
$node->safe_psql('tenants', 'CREATE EXTENSION idempotency;' . tenant_recipe('tenant_a', 'tenant_b'));
$node->safe_psql('tenants', q{
	SET ROLE tenant_b;
	BEGIN;
	SELECT idem_claim('b-pay', '{"amount": 9}', 'tenant_b');
	SELECT idem_complete('b-pay', 201, '{"payment_id": 99}', 'tenant_b');
	COMMIT;
	RESET ROLE;
});

# tenant A's attack on B's key, in a database: what A sees and changes
sub attack
{
	my ($n, $db) = @_;
	my ($rc, $out, $err) = $n->psql($db, q{
		SET ROLE tenant_a;
		SELECT 'seen ' || count(*) FROM idempotency_keys WHERE scope = 'tenant_b';
		UPDATE idempotency_keys SET response = '{"payment_id": 1}' WHERE scope = 'tenant_b';
		SELECT 'looked up ' || count(*) FROM idem_lookup('b-pay', 'tenant_b');
		SELECT outcome FROM idem_claim('b-pay', '{"amount": 9}', 'tenant_b');});
	return "$out|$err";
}
like(attack($node, 'tenants'), qr/^seen 0\nlooked up 0\|.*new row violates row-level security policy/s,
	'tenants: A neither sees, changes nor claims B\'s key');

my $tdump = $node->basedir . '/tenants.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $tdump, '-d', $node->connstr('tenants') ], 'pg_dump -Fc tenants');
$node->safe_psql('postgres', 'CREATE DATABASE tenants_restored');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('tenants_restored'), $tdump ], 'pg_restore tenants');
my $tplain = $node->basedir . '/tenants.sql';
$node->command_ok([ 'pg_dump', '-f', $tplain, '-d', $node->connstr('tenants') ], 'pg_dump plain tenants');
$node->safe_psql('postgres', 'CREATE DATABASE tenants_plain');
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', $tplain, '-d', $node->connstr('tenants_plain') ],
	'psql restores the plain dump of tenants');

# pg_dumpall into a new cluster, roles and all
my $all = $node->basedir . '/all.sql';
$node->command_ok([ 'pg_dumpall', '-f', $all, '-h', $node->host, '-p', $node->port ], 'pg_dumpall');
my $other = PostgreSQL::Test::Cluster->new('dumpall');
$other->init;
$other->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$other->start;
$other->command_ok([ 'psql', '-X', '-q', '-f', $all, '-d', $other->connstr('postgres') ],
	'psql restores pg_dumpall into a new cluster');

foreach my $target ([ $node, 'tenants_restored' ], [ $node, 'tenants_plain' ], [ $other, 'tenants' ])
{
	my ($n, $db) = @$target;
	my $where = ($n == $other ? 'pg_dumpall: ' : '') . $db;
	is($n->safe_psql($db, q{SELECT relrowsecurity AND relforcerowsecurity FROM pg_class WHERE relname = 'idempotency_keys'}),
		't', "$where: row level security is on");
	is($n->safe_psql($db, q{SELECT string_agg(polname, ' ' ORDER BY polname) FROM pg_policy
		WHERE polrelid = 'idempotency_keys'::regclass}), 'admin_all tenant_scope', "$where: the policies are back");
	like(attack($n, $db), qr/^seen 0\nlooked up 0\|.*new row violates row-level security policy/s,
		"$where: A neither sees, changes nor claims B's key");
	is($n->safe_psql($db, q{SET ROLE tenant_b;
		SELECT outcome || ' ' || response FROM idem_claim('b-pay', '{"amount": 9}', 'tenant_b')}),
		'replay {"payment_id": 99}', "$where: B's key replays B's response");
}

# A restore that skips the trigger (a data-only restore with
# --disable-triggers into a schema restored apart) fails closed: the key
# functions refuse to run until the policies are back.
$node->safe_psql('postgres', 'CREATE DATABASE tenants_split');
$node->command_ok([ 'pg_restore', '--schema-only', '-d', $node->connstr('tenants_split'), $tdump ],
	'pg_restore --schema-only');
$node->command_ok([ 'pg_restore', '--data-only', '--disable-triggers', '-d', $node->connstr('tenants_split'), $tdump ],
	'pg_restore --data-only --disable-triggers');
my ($rc, $out, $err) = $node->psql('tenants_split',
	q{SET ROLE tenant_a; SELECT outcome FROM idem_claim('b-pay', '{"amount": 9}', 'tenant_b')});
like($err, qr/row level security of idempotency_keys is not in place/,
	'tenants_split: with the policies recorded but not in place, the key functions refuse (IK006)');
is($node->safe_psql('tenants_split', 'SELECT idem_restore_row_security()'), '2',
	'tenants_split: idem_restore_row_security() puts both policies back');
like(attack($node, 'tenants_split'), qr/^seen 0\nlooked up 0\|.*new row violates row-level security policy/s,
	'tenants_split: then A neither sees, changes nor claims B\'s key');

# A recorded policy that cannot be made again (its role is gone) puts none
# back: row level security on and no policy shows tenants nothing, and the
# key functions refuse (IK006) until every recorded policy is in place.
$node->safe_psql('tenants', q{
	CREATE ROLE auditor;
	CREATE POLICY auditor_read ON idempotency_keys FOR SELECT TO auditor USING (true);
	SELECT idem_save_row_security();});
my $adump = $node->basedir . '/tenants_auditor.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $adump, '-d', $node->connstr('tenants') ], 'pg_dump -Fc with a third policy');
$node->safe_psql('tenants', q{DROP POLICY auditor_read ON idempotency_keys; SELECT idem_save_row_security(); DROP ROLE auditor;});
$node->safe_psql('postgres', 'CREATE DATABASE tenants_norole');
my ($aout, $aerr);
IPC::Run::run([ 'pg_restore', '-d', $node->connstr('tenants_norole'), $adump ], '>', \$aout, '2>', \$aerr);
like(slurp_file($node->logfile), qr/could not put policy "auditor_read" back/,
	'tenants_norole: the restore warns of the policy it could not make');
is($node->safe_psql('tenants_norole', q{SELECT relrowsecurity::text || ' ' || (SELECT count(*) FROM pg_policy
	WHERE polrelid = 'idempotency_keys'::regclass) || ' ' || (SELECT count(*) FROM idempotency_row_security)
	FROM pg_class WHERE relname = 'idempotency_keys'}),
	'true 0 3', 'tenants_norole: row level security on, no policy, all three still recorded');
is($node->safe_psql('tenants_norole', q{SET ROLE tenant_a; SELECT count(*) FROM idempotency_keys}),
	'0', 'tenants_norole: a tenant sees no key through the table');
($rc, $out, $err) = $node->psql('tenants_norole', q{SET ROLE tenant_a; SELECT count(*) FROM idem_lookup('b-pay', 'tenant_b')});
like($err, qr/Policy "\w+" is recorded in idempotency_row_security but missing/,
	'tenants_norole: the key functions refuse (IK006), naming the missing policy');

$other->stop;
$node->stop;
done_testing();
