# Every function on a hot standby, in both editions: the C build
# (preloaded) and the SQL edition on a server without the library, as a
# managed service's read replica runs it, installed by a database owner
# that is not a superuser, with the tenant recipe (docs/tenants.md, and the
# owner's own policy the edition needs there).
#
# What it promises: on the standby each function that writes refuses with
# 25006 (read only), and each other one answers as it does on the primary;
# tenants see only their own keys there too; once promoted, completed keys
# replay byte for byte, a stale claim is taken over, and new tokens come
# after every old one.  %CALLS names each idem_* function of both editions
# (by name and argument count; the SQL edition's internal idem__* and
# _idem_record_* helpers run only inside these): a function added to either
# fails this test until it is listed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Basename;
use FindBin;
use lib $FindBin::RealBin;
use IdemTest;

my $root = dirname(dirname($FindBin::RealBin));

# NAME/NARGS => [kind, SQL]: kind write (25006 on the standby), same (the
# same output or SQLSTATE as on the primary), runs (no error on the
# standby: counters differ from server to server), trigger (called only by
# its trigger)
my %CALLS = (
	'idem_claim/8'          => [ 'write', q{SELECT idem_claim('standby-new', '{"amount": 1}', 'm1')} ],
	'idem_claim_batch/7'    => [ 'write', q{SELECT count(*) FROM idem_claim_batch(ARRAY['standby-b'], NULL, 'm1')} ],
	'idem_complete/5'       => [ 'write', q{SELECT idem_complete('processing', 200, '{}', 'm1')} ],
	'idem_fail/6'           => [ 'write', q{SELECT idem_fail('processing', 'm1')} ],
	'idem_heartbeat/4'      => [ 'write', q{SELECT idem_heartbeat('processing', 'm1')} ],
	'idem_checkpoint/4'     => [ 'write', q{SELECT idem_checkpoint('processing', 'step', 'm1')} ],
	'idem_release/3'        => [ 'write', q{SELECT idem_release('processing', 'm1')} ],
	'idem_record_batch/7'   => [ 'write', q{SELECT count(*) FROM idem_record_batch(ARRAY['standby-r'], ARRAY[200], ARRAY['{}'::jsonb], 'm1')} ],
	'idem_execute/5'        => [ 'write', q{SELECT idem_execute('standby-x', NULL, 'm3', 200, 'SELECT 1 AS one')} ],
	'idem_execute/6'        => [ 'write', q{SELECT idem_execute('standby-x', NULL, 'm3', 200, 'SELECT $1 AS one', '1')} ],
	'idem_expire/1'         => [ 'write', q{SELECT idem_expire()} ],
	'idem_resolve/5'        => [ 'write', q{SELECT idem_resolve('processing', 'm1', 'fail')} ],
	'idem_save_row_security/0' => [ 'write', q{SELECT idem_save_row_security()} ],
	'idem_lookup/2'         => [ 'same', q{SELECT k FROM idem_lookup('completed', 'm1') k} ],
	'idem_request_hash/1'   => [ 'same', q{SELECT idem_request_hash('{"amount": 12.50, "x": [1e40]}'::jsonb), idem_request_hash('a'::text), idem_request_hash('\x01'::bytea)} ],
	'idem_hash_canonical/1' => [ 'same', q{SELECT idem_hash_canonical('{"b": 1.50, "a": 1e40}')} ],
	'idem_hash_number/1'    => [ 'same', q{SELECT idem_hash_number(1e40)} ],
	'idem_row_storable/3'   => [ 'same', q{SELECT idem_row_storable('{}', repeat('x', 1048577), NULL)} ],
	'idem_restore_row_security/0' => [ 'write', q{SELECT idem_restore_row_security()} ],
	'idem_stats_reset/0'    => [ 'same', q{SELECT idem_stats_reset() IS NULL} ],
	'idem_distribute/2'     => [ 'same', q{SELECT idem_distribute()} ],
	'idem_key_lock/3'       => [ 'same', q{SELECT idem_key_lock('m1', 'completed', 0)} ],
	'idem_stats/0'          => [ 'runs', q{SELECT count(*) FROM idem_stats()} ],
	'idem_stats_databases/0' => [ 'runs', q{SELECT count(*) >= 0 FROM idem_stats_databases()} ],
	'idem_table_bytes/0'    => [ 'runs', q{SELECT idem_table_bytes() > 0} ],
	'idem_row_security_restored/0' => [ 'trigger', '' ],
);

# The SQL edition's plain script, built here (edition/dist is made by make
# edition, which this test does not assume)
my $dist = PostgreSQL::Test::Utils::tempdir;
system('bash', "$root/edition/build.sh", $dist) == 0 or die "edition/build.sh failed";
my ($plain) = glob("$dist/idempotency-sql--*.sql");

# psql as ROLE in shop: (output, SQLSTATE or '') of SQL
sub run_as
{
	my ($node, $role, $sql) = @_;
	my ($rc, $out, $err) = $node->psql('shop', "\\set VERBOSITY sqlstate\n$sql",
		extra_params => [ '-U', $role ]);
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5})/;
	return ($out, $state // ($rc ? "exit $rc: $err" : ''));
}

foreach my $edition ('c', 'sql')
{
	my $primary = PostgreSQL::Test::Cluster->new("primary_$edition");
	$primary->init(allows_streaming => 1);
	$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'")
	  if $edition eq 'c';
	$primary->start;
	my $owner = $edition eq 'c' ? 'postgres' : 'shop_owner';
	$primary->safe_psql('postgres', "CREATE ROLE shop_owner LOGIN CREATEROLE");
	$primary->safe_psql('postgres', "CREATE DATABASE shop OWNER shop_owner");
	if ($edition eq 'c')
	{
		$primary->safe_psql('shop', 'CREATE EXTENSION idempotency');
	}
	else
	{
		$primary->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-U', 'shop_owner',
				'-d', $primary->connstr('shop'), '-f', $plain ],
			"$edition: the plain script, as the database's owner");
	}
	$primary->safe_psql('shop', keys_in_every_state() . tenant_recipe('m1', 'm2', 'm3')
		  . "CREATE POLICY owner_all ON idempotency_keys TO CURRENT_USER USING (true) WITH CHECK (true);\n"
		  . "SELECT idem_save_row_security();\n"
		  . "GRANT SELECT, INSERT ON payments TO m3; GRANT USAGE ON SEQUENCE payments_id_seq TO m3;\n",
		extra_params => [ '-U', $owner ]);
	my $max_token = $primary->safe_psql('shop', 'SELECT max(token) FROM idempotency_keys',
		extra_params => [ '-U', $owner ]);

	# every idem_* function of this edition is listed
	my @names = split /\n/, $primary->safe_psql('shop', q{
		SELECT p.proname || '/' || p.pronargs FROM pg_proc p
		 WHERE p.proname LIKE 'idem\_%' AND p.proname NOT LIKE 'idem\_\_%'
		   AND p.pronamespace <> 'pg_catalog'::regnamespace ORDER BY 1});
	is(join(' ', grep { !exists $CALLS{$_} } @names), '',
		"$edition: every idem_* function is listed in this test");

	$primary->backup('b');
	my $standby = PostgreSQL::Test::Cluster->new("standby_$edition");
	$standby->init_from_backup($primary, 'b', has_streaming => 1);
	$standby->start;
	$primary->wait_for_catchup($standby);

	foreach my $name (@names)
	{
		my ($kind, $sql) = @{ $CALLS{$name} // [ 'unlisted', '' ] };
		next if $kind eq 'trigger' || $kind eq 'unlisted';
		my ($out, $state) = run_as($standby, $owner, $sql);
		if ($kind eq 'write')
		{
			is($state, '25006', "$edition: $name refuses on the standby (read only)");
		}
		elsif ($kind eq 'runs')
		{
			is($state, '', "$edition: $name runs on the standby");
		}
		else
		{
			my ($pout, $pstate) = run_as($primary, $owner, $sql);
			is("$state|$out", "$pstate|$pout", "$edition: $name answers on the standby as on the primary");
		}
	}

	# tenants on the standby: their own keys only
	my ($seen) = run_as($standby, 'm2', q{SELECT string_agg(DISTINCT scope, ',') FROM idempotency_keys});
	is($seen, 'm2', "$edition: on the standby a tenant sees only its own scope");
	my ($other) = run_as($standby, 'm2', q{SELECT count(*) FROM idem_lookup('completed', 'm1')});
	is($other, '0', "$edition: on the standby a tenant cannot look another's key up");

	# promoted: replays byte for byte, a stale claim taken over, tokens go on
	my ($before) = run_as($primary, 'm1', q{SELECT response::text FROM idem_lookup('completed', 'm1')});
	$standby->promote;
	$standby->poll_query_until('shop', 'SELECT NOT pg_is_in_recovery()')
	  or die "the standby was not promoted";
	my ($replay) = run_as($standby, 'm1',
		q{SELECT outcome || ' ' || response::text FROM idem_claim('completed', '{"amount": 300}', 'm1')});
	is($replay, "replay $before", "$edition: promoted, a completed key replays byte for byte");
	my ($stale) = run_as($standby, 'm1',
		q{SELECT outcome || ' ' || (token > } . $max_token . q{) FROM idem_claim('stale', NULL, 'm1')});
	is($stale, 'reclaimed true', "$edition: promoted, a stale claim is taken over with a newer token");
	my ($fresh) = run_as($standby, 'm2',
		q{SELECT outcome || ' ' || (token > } . $max_token . q{) FROM idem_claim('after', NULL, 'm2')});
	is($fresh, 'new true', "$edition: promoted, a new key's token comes after every old one");

	$standby->stop;
	$primary->stop;
}

done_testing();
