# Upgrade path: ALTER EXTENSION idempotency UPDATE from every earlier version
# gives the same schema as a fresh install of the default version, and keeps
# every key row.
#
# Schemas are compared with pg_dump --binary-upgrade --schema-only, which
# dumps each member object of the extension (a plain dump only says CREATE
# EXTENSION); OIDs, xids and the dump's \restrict nonce are masked.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;

my $default = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'idempotency'");
my @versions = split /\n/, $node->safe_psql('postgres',
	"SELECT version FROM pg_available_extension_versions
	 WHERE name = 'idempotency' AND version <> '$default' ORDER BY version");
ok(@versions >= 1, "there are earlier versions to upgrade from: @versions");

# A schema-only dump of one database, with what differs between any two
# databases masked.
sub schema_of
{
	my ($db) = @_;
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[ 'pg_dump', '--schema-only', '--binary-upgrade', '--no-owner',
		  '-h', $node->host, '-p', $node->port, $db ],
		'>', \$stdout, '2>', \$stderr);
	die "pg_dump $db failed: $stderr" unless $ok;
	my @lines;
	for my $line (split /\n/, $stdout)
	{
		next if $line =~ /^\\(un)?restrict /;
		next if $line =~ /^--/ || $line eq '';
		next if $line =~ /binary_upgrade_set_next_/;
		# due_at was added with a default on an updated table; the value
		# only stands in for rows stored before that
		next if $line =~ /binary_upgrade_set_missing_value/;
		next if $line =~ /pg_catalog\.setval\(/;    # data, compared separately
		$line =~ s/relfrozenxid = '\d+', relminmxid = '\d+'/relfrozenxid = X, relminmxid = X/;
		$line =~ s/oid = '\d+'/oid = X/g;
		$line =~ s/'\{\d+(,\d+)*\}'/'{OIDS}'/g;
		push @lines, $line;
	}
	return join("\n", @lines) . "\n";
}

# Keys in every state, as a version's functions make them.
my $fill = q{
	SELECT idem_claim('processing', '{"a": 1}', 's1', lease => '1 hour');
	SELECT idem_claim('stale', NULL, 's1', lease => '1 ms');
	SELECT idem_checkpoint('stale', 'step-2', 's1', (SELECT token FROM idempotency_keys WHERE key = 'stale'));
	BEGIN;
	SELECT idem_claim('completed', '{"amount": 300}', 's1');
	SELECT idem_complete('completed', 201, '{"payment_id": 7}', 's1');
	SELECT idem_claim('declined', NULL, 's2');
	SELECT idem_fail('declined', 's2', response_code => 402, response => '{"error": "card_declined"}', retryable => false);
	SELECT idem_claim('retry', NULL, 's2');
	SELECT idem_fail('retry', 's2');
	COMMIT;
};
# Every column 0.1.0 had, which every later version keeps.
my $rows = q{SELECT md5(string_agg(row(scope, key, status, retryable, response_code, token,
	locked_until, created_at, updated_at, expires_at, request_hash, recovery_point, response)::text,
	'|' ORDER BY scope, key)) FROM idempotency_keys};

$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION idempotency');
is($node->safe_psql('fresh', "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'"),
	$default, "fresh install is $default");
my $fresh_schema = schema_of('fresh');

foreach my $v (@versions)
{
	my $db = "from_$v";
	$db =~ s/\./_/g;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION idempotency VERSION '$v'");
	$node->safe_psql($db, $fill);
	# the library serves the old declaration of idem_stats() (fewer columns),
	# with this database's counters
	$node->safe_psql($db, 'SELECT idem_stats_reset()');
	$node->safe_psql($db, q{SELECT idem_claim('stats-old', NULL, 'stats')});
	is($node->safe_psql($db, 'SELECT claims_new FROM idempotency_stats'), '1',
		"$v: the old idempotency_stats shows this database's counters");

	my $before = $node->safe_psql($db, $rows);
	my $seq_before = $node->safe_psql($db, 'SELECT last_value FROM idempotency_token_seq');

	$node->safe_psql($db, 'ALTER EXTENSION idempotency UPDATE');
	is($node->safe_psql($db, 'SELECT claims_new || \' \' || attempts_exhausted || \' \' || claims_awaited FROM idempotency_stats'),
		'1 0 0', "$v -> $default: the counters survive the update, with the new columns");
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'"),
		$default, "$v updates to $default");
	is($node->safe_psql($db, $rows), $before, "$v -> $default keeps every key row");
	is($node->safe_psql($db, 'SELECT last_value FROM idempotency_token_seq'), $seq_before,
		"$v -> $default keeps the token sequence");
	is(schema_of($db), $fresh_schema, "$v -> $default gives the schema of a fresh install");
	# versions before 0.3.0 had no due_at: the update adds it
	my $had_due_at = $v ge '0.3.0';
	is($node->safe_psql($db, q{SELECT count(*) FILTER (WHERE due_at <> '-infinity') FROM idempotency_keys}),
		'0', "$v -> $default: every old row is due, without a rewrite of the table")
		unless $had_due_at;

	is($node->safe_psql($db, q{SELECT count(*) FILTER (WHERE attempts <> 1) FROM idempotency_keys}),
		'0', "$v -> $default: every old row counts one attempt");

	# the updated extension works on the old rows
	is($node->safe_psql($db,
		q{SELECT outcome || ' ' || response_code || ' ' || response FROM idem_claim('completed', '{"amount": 300}', 's1')}),
		'replay 201 {"payment_id": 7}', "$v -> $default: a completed key replays");
	is($node->safe_psql($db,
		q{SELECT outcome || ' ' || recovery_point FROM idem_claim('stale', NULL, 's1')}),
		'reclaimed step-2', "$v -> $default: a stale claim is reclaimed with its recovery point");
	is($node->safe_psql($db, q{SELECT attempts FROM idem_lookup('stale', 's1')}),
		'2', "$v -> $default: the takeover counts a second attempt");
	is($node->safe_psql($db,
		q{SELECT outcome FROM idem_claim('processing', '{"a": 1}', 's1')}),
		'in_progress', "$v -> $default: a live claim is in progress");
	$node->safe_psql($db, 'CREATE TABLE payments (id serial PRIMARY KEY, amount int)');
	is($node->safe_psql($db,
		q{SELECT outcome || ' ' || response FROM idem_execute('new', NULL, 's1', 201, 'INSERT INTO payments (amount) VALUES ($1) RETURNING id', 5)}),
		'new {"id": 1}', "$v -> $default: functions of the new version work");

	# expiry gives every old row its due time: the lease end while
	# processing, expires_at after (none of these rows has expired)
	$node->safe_psql($db, 'SELECT idem_expire()');
	is($node->safe_psql($db, q{SELECT count(*) FROM idempotency_keys WHERE due_at <= now()}),
		'0', "$v -> $default: after expiry no row is due") if $had_due_at;
	next if $had_due_at;
	is($node->safe_psql($db, q{SELECT count(*) FROM idempotency_keys
		WHERE due_at IS DISTINCT FROM CASE WHEN status = 'processing' AND locked_until > now()
			THEN locked_until ELSE expires_at END}),
		'0', "$v -> $default: expiry sets every old row's due time");
}

# A row the functions would refuse, written directly before 0.4.0 (a
# tenant held UPDATE): the update checks every row against the new CHECK,
# and fails naming it, rather than leave a row that would make every
# restore of the table fail.
$node->safe_psql('postgres', 'CREATE DATABASE badrow');
$node->safe_psql('badrow', q{CREATE EXTENSION idempotency VERSION '0.3.0';
	SELECT idem_claim('big', NULL, 's');
	UPDATE idempotency_keys SET request_hash = convert_to(repeat('a', 64), 'UTF8') WHERE key = 'big';});
my ($brc, $bout, $berr) = $node->psql('badrow', 'ALTER EXTENSION idempotency UPDATE');
like($berr, qr/idempotency_keys_storable/, '0.3.0 -> 0.4.0 with a row the CHECK refuses: the update fails, naming the constraint');
is($node->safe_psql('badrow', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
	'0.3.0', 'and the extension stays at 0.3.0');

# Policies made under 0.3.0, which recorded none: the update records them,
# so that the next pg_dump keeps them (else a dump and restore after the
# update came back with row level security off, every tenant's keys open
# to every other: an attacker's walk of the backup paths).
$node->safe_psql('postgres', 'CREATE DATABASE rls03');
$node->safe_psql('rls03', q{CREATE EXTENSION idempotency VERSION '0.3.0';
	ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
	ALTER TABLE idempotency_keys FORCE ROW LEVEL SECURITY;
	CREATE POLICY tenant_scope ON idempotency_keys TO idempotency_app
		USING (scope = current_user) WITH CHECK (scope = current_user);
	CREATE POLICY admin_all ON idempotency_keys TO idempotency_admin USING (true) WITH CHECK (true);
	ALTER EXTENSION idempotency UPDATE;});
is($node->safe_psql('rls03', q{SELECT string_agg(policy || ' ' || array_to_string(roles, ','), '; ' ORDER BY policy)
	FROM idempotency_row_security}),
	'admin_all idempotency_admin; tenant_scope idempotency_app',
	'0.3.0 -> 0.4.0 with row level security on: the update records the policies for pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE norls03');
$node->safe_psql('norls03', q{CREATE EXTENSION idempotency VERSION '0.3.0'; ALTER EXTENSION idempotency UPDATE;});
is($node->safe_psql('norls03', q{SELECT count(*) FROM idempotency_row_security}), '0',
	'0.3.0 -> 0.4.0 without row level security: nothing recorded');

# One session across the update: the library serves the old schema, then
# makes its statements again for the new one (due_at set by the claim):
# from the last version whose table had no due_at.
my ($prev) = grep { $_ lt '0.3.0' } reverse @versions;
$node->safe_psql('postgres', 'CREATE DATABASE insession');
$node->safe_psql('insession', "CREATE EXTENSION idempotency VERSION '$prev'");
is($node->safe_psql('insession', q{
	SELECT outcome FROM idem_claim('before', NULL, 's');
	ALTER EXTENSION idempotency UPDATE;
	SELECT outcome FROM idem_claim('after', NULL, 's');
	SELECT idem_complete('before', 200, '{}', 's', (SELECT token FROM idempotency_keys WHERE key = 'before'));
	SELECT string_agg(key || ':' || (due_at = CASE WHEN key = 'after' THEN locked_until ELSE '-infinity' END), ' ' ORDER BY key)
	FROM idempotency_keys;}),
	"new\nnew\n\nafter:true before:true",
	"$prev -> $default in one session: claims work before and after, and the new claim sets due_at");

$node->stop;
done_testing();
