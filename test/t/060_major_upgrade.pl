# A major upgrade, as a DBA makes it: a database on an older PostgreSQL
# (IDEM_OLD_INSTALL: that version's installation, with idempotency built
# and installed for it), with keys in every state and the tenant recipe,
# moved to the PostgreSQL under test by pg_dumpall --globals-only plus
# pg_dump -Fc / pg_restore, and by pg_upgrade.  After each: every key row
# byte for byte (due times included), the token sequence past every old
# token, privileges, tenant isolation, and claims go on (replay, takeover,
# in progress, new).
#
# test/run.sh sets IDEM_OLD_INSTALL in the chroot of every version after 15,
# from the PostgreSQL 15 its own run installed; IDEM_OLD_LIBRARY_PATH names
# the old binaries' shared libraries that the newer Debian release lacks.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemTest;

my $old_install = $ENV{IDEM_OLD_INSTALL};
plan skip_all => 'IDEM_OLD_INSTALL names no older PostgreSQL with idempotency installed'
  unless $old_install && -x "$old_install/bin/postgres" && -e "$old_install/lib/idempotency.so";
$ENV{LD_LIBRARY_PATH} = join(':', grep { $_ } $ENV{IDEM_OLD_LIBRARY_PATH}, $ENV{LD_LIBRARY_PATH})
  if $ENV{IDEM_OLD_LIBRARY_PATH};

my $conf = "shared_preload_libraries = 'idempotency'\nidempotency.worker_databases = ''\n";

# The old cluster.  PostgreSQL 18's initdb turns data checksums on, older
# ones do not; pg_upgrade needs both clusters alike, so both have them.
my $old = PostgreSQL::Test::Cluster->new('old', install_path => $old_install);
$old->init(extra => ['--data-checksums']);
$old->append_conf('postgresql.conf', $conf);
$old->start;
my $old_version = $old->safe_psql('postgres', 'SHOW server_version_num');
my $new_probe = PostgreSQL::Test::Cluster->new('probe');
cmp_ok(int($old_version / 10000), '<', $new_probe->pg_version->major,
	"the old cluster runs PostgreSQL " . int($old_version / 10000) . ", older than " . $new_probe->pg_version->major);

$old->safe_psql('postgres', 'CREATE DATABASE pay');
$old->safe_psql('pay', 'CREATE EXTENSION idempotency;' . tenant_recipe('m1', 'm2', 'm3'));
$old->safe_psql('pay', keys_in_every_state() . q{
	GRANT SELECT, INSERT ON payments TO idempotency_app;
	GRANT USAGE ON SEQUENCE payments_id_seq TO idempotency_app;});

my $rows = q{SELECT string_agg(k::text, E'\n' ORDER BY scope, key) FROM idempotency_keys k};
my $before = $old->safe_psql('pay', $rows);
my $max_token = $old->safe_psql('pay', 'SELECT max(token) FROM idempotency_keys');
my $ext_version = $old->safe_psql('pay', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'});
is($old->safe_psql('pay', 'SELECT count(*) FROM idempotency_keys'), '6', 'six keys in every state on the old cluster');

# The new cluster to restore into
my $restored = PostgreSQL::Test::Cluster->new('restored');
$restored->init;
$restored->append_conf('postgresql.conf', $conf);
$restored->start;

# PostgreSQL 15.20 and 17.12 (November 2026) put a column option,
# pg_attver, on every column they create; 18.6 and 19rc1, Debian's newest,
# do not know it, so pg_dump's and pg_upgrade's ALTER COLUMN ... SET
# (pg_attver=...) fails there for every table, ours or not.  Where the new
# version refuses it, the test does what docs/operations.md tells a DBA:
# leave the option out of the restore, and take it off the old cluster's
# columns before pg_upgrade.
my $old_attver = $old->safe_psql('pay',
	q{SELECT count(*) FROM pg_attribute WHERE array_to_string(attoptions, ',') LIKE '%pg_attver=%'});
my ($attver_rc) = $restored->psql('postgres',
	'CREATE TEMP TABLE attver_probe (a int); ALTER TABLE attver_probe ALTER COLUMN a SET (pg_attver = 1)');
my $attver_gap = $old_attver > 0 && $attver_rc != 0;
note("the old version writes pg_attver and the new one refuses it: the restore leaves it out")
  if $attver_gap;

# pg_dump and pg_dumpall of the new version, against the old server
my $globals = $old->basedir . '/globals.sql';
my $dump = $old->basedir . '/pay.dump';
command_ok([ 'pg_dumpall', '--globals-only', '-f', $globals, '-h', $old->host, '-p', $old->port ],
	'pg_dumpall --globals-only of the old cluster');
command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $old->connstr('pay') ], 'pg_dump -Fc of the old cluster');

# by dump and restore into the new cluster
# (the globals name the bootstrap superuser, which exists: psql goes on past that one error)
$restored->command_ok([ 'psql', '-X', '-q', '-f', $globals, '-d', $restored->connstr('postgres') ],
	'psql restores the globals');
$restored->safe_psql('postgres', 'CREATE DATABASE pay');
if (!$attver_gap)
{
	$restored->command_ok([ 'pg_restore', '--exit-on-error', '-d', $restored->connstr('pay'), $dump ],
		'pg_restore into the new version');
}
else
{
	my $script = $old->basedir . '/pay.sql';
	command_ok([ 'pg_restore', '-f', $script, $dump ], 'pg_restore -f: the dump as a script');
	my $text = slurp_file($script);
	$text =~ s/^ALTER TABLE ONLY \S+ ALTER COLUMN \S+ SET \(pg_attver=\d+\);\n//mg;
	append_to_file("$script.filtered", $text);
	$restored->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', "$script.filtered", '-d', $restored->connstr('pay') ],
		'psql restores it into the new version, without pg_attver');
}

if ($attver_gap)
{
	foreach my $db ('postgres', 'template1', 'pay')
	{
		$old->safe_psql($db, q{
			UPDATE pg_attribute SET attoptions = NULLIF(ARRAY(SELECT o FROM unnest(attoptions) o WHERE o NOT LIKE 'pg_attver=%'), '{}')
			WHERE array_to_string(attoptions, ',') LIKE '%pg_attver=%'});
	}
}
$old->stop;

# by pg_upgrade
my $upgraded = PostgreSQL::Test::Cluster->new('upgraded');
$upgraded->init(extra => ['--data-checksums']);
$upgraded->append_conf('postgresql.conf', $conf);
chdir $PostgreSQL::Test::Utils::tmp_check;
command_ok(
	[
		'pg_upgrade', '--no-sync',
		'-d', $old->data_dir, '-D', $upgraded->data_dir,
		'-b', "$old_install/bin", '-B', $upgraded->config_data('--bindir'),
		'-s', $upgraded->host, '-p', $old->port, '-P', $upgraded->port
	],
	'pg_upgrade from the old version');
$upgraded->start;

foreach my $target ([ $restored, 'pg_dump/pg_restore' ], [ $upgraded, 'pg_upgrade' ])
{
	my ($n, $how) = @$target;
	is($n->safe_psql('pay', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
		$ext_version, "$how: the extension's version is the old cluster's");
	is($n->safe_psql('pay', $rows), $before, "$how: every key row is identical, due times included");
	is($n->safe_psql('pay',
		q{SELECT has_function_privilege('idempotency_app', 'idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer)', 'EXECUTE')
		     AND NOT has_function_privilege('public', 'idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer)', 'EXECUTE')
		     AND NOT has_table_privilege('public', 'idempotency_keys', 'SELECT')}),
		't', "$how: privileges are kept");
	is($n->safe_psql('pay', q{SELECT relrowsecurity AND relforcerowsecurity FROM pg_class WHERE relname = 'idempotency_keys'}),
		't', "$how: row level security is on");
	my ($rc, $out, $err) = $n->psql('pay', q{SET ROLE m2;
		SELECT 'seen ' || count(*) FROM idempotency_keys WHERE scope <> 'm2';
		SELECT 'looked up ' || count(*) FROM idem_lookup('completed', 'm1');
		SELECT outcome FROM idem_claim('processing', '{"amount": 1}', 'm1');});
	like("$out|$err", qr/^seen 0\nlooked up 0\|.*new row violates row-level security policy/s,
		"$how: tenant m2 neither sees nor claims m1's keys");

	# claims go on, as each tenant
	cmp_ok($n->safe_psql('pay', q{SET ROLE m3; SELECT token FROM idem_claim('fresh', NULL, 'm3')}),
		'>', $max_token, "$how: a new claim gets a token larger than every old one");
	is($n->safe_psql('pay', q{SET ROLE m1;
		SELECT outcome || ' ' || response_code || ' ' || response FROM idem_claim('completed', '{"amount": 300}', 'm1')}),
		'replay 201 {"note": "é ✓", "payment_id": 1}', "$how: a completed key replays its response");
	($rc, $out, $err) = $n->psql('pay', q{SET ROLE m1; SELECT idem_claim('completed', '{"amount": 301}', 'm1')});
	like($err, qr/IK001|different request/i, "$how: the same key with another request is refused");
	is($n->safe_psql('pay', q{SET ROLE m2; SELECT outcome || ' ' || response_code FROM idem_claim('declined', NULL, 'm2')}),
		'replay 402', "$how: a failed key replays its error");
	is($n->safe_psql('pay', q{SET ROLE m1; SELECT outcome || ' ' || recovery_point FROM idem_claim('stale', NULL, 'm1')}),
		'reclaimed card-authorized', "$how: a stale claim is taken over with its recovery point");
	is($n->safe_psql('pay', q{SET ROLE m1; SELECT outcome FROM idem_claim('processing', '{"amount": 1}', 'm1')}),
		'in_progress', "$how: a live claim is still in progress");
	is($n->safe_psql('pay', q{SET ROLE m2; SELECT outcome FROM idem_claim('retry', NULL, 'm2')}),
		'reclaimed', "$how: a retryable failure is claimed again");
	is($n->safe_psql('pay', q{SET ROLE m3;
		SELECT outcome FROM idem_execute('exec', '{"amount": 5}', 'm3', 201, 'INSERT INTO payments (key, amount) VALUES ($1, $2)', 'exec', 5)}),
		'replay', "$how: idem_execute replays");
	is($n->safe_psql('pay', q{SELECT count(*) FROM payments}), '2', "$how: no payment was made again");
}

$restored->stop;
$upgraded->stop;
done_testing();
