# The counters per database (issue 30) when idempotency.stats_max_databases
# runs out: a database beyond the slots is counted with the other such
# databases (idem_stats_databases() row with dbid NULL), its own
# idempotency_stats shows NULL, and the server says so once; a reset frees
# the slots of dropped databases, and a new connection then gets one; a
# database made later with a dropped one's OID does not inherit its counters.  A
# database without the extension that the worker visits takes no slot.  A
# restart loses the counters.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('stats_databases');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
idempotency.stats_max_databases = 2
idempotency.worker_databases = 'postgres'
idempotency.worker_interval = '100ms'
});
$node->start;

# the worker visits postgres, which has no extension: no slot taken
usleep_ok();
foreach my $db (qw(d1 d2 d3))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION idempotency');
}
$node->safe_psql('d1', q{SELECT idem_claim('k' || i, NULL) FROM generate_series(1, 3) i});
$node->safe_psql('d2', q{SELECT idem_claim('k' || i, NULL) FROM generate_series(1, 2) i});
is($node->safe_psql('d1', 'SELECT claims_new FROM idempotency_stats'), '3', 'd1 has its own counters');
is($node->safe_psql('d2', 'SELECT claims_new FROM idempotency_stats'), '2', 'so has d2');
is($node->safe_psql('d3', 'SELECT count(*) FROM idempotency_stats WHERE claims_new = 0'), '0',
	'd3, past the two slots, has none: its counters are NULL');

my $logpos = -s $node->logfile;
$node->safe_psql('d3', q{SELECT idem_claim('k' || i, NULL) FROM generate_series(1, 5) i});
$node->safe_psql('d3', q{SELECT idem_claim('again', NULL)});
is($node->safe_psql('d3', 'SELECT count(*) FROM idempotency_stats WHERE claims_new IS NULL'), '1',
	'd3 counted with other databases shows NULL');
is($node->safe_psql('d1', q{SELECT coalesce(datname, '(other)') || ' ' || claims_new
	FROM idem_stats_databases() ORDER BY datname NULLS LAST}),
	"d1 3\nd2 2\n(other) 6", 'idem_stats_databases(): the two slots, and d3 among the others');
my $log = slurp_file($node->logfile, $logpos);
my $logged = () = $log =~ /database \d+ is counted with other databases: all 2 statistics slots are taken/g;
is($logged, 1, 'the server says so, once');

# dropping d1 and a reset free its slot; d3's next connection takes it
my $d1oid = $node->safe_psql('postgres', q{SELECT oid FROM pg_database WHERE datname = 'd1'});
$node->safe_psql('postgres', 'DROP DATABASE d1');
is($node->safe_psql('d2', q{SELECT count(*) FROM idem_stats_databases() WHERE datname IS NULL AND dbid IS NOT NULL}),
	'1', "a dropped database's counters stay until a reset");

# a database made with the dropped one's OID (CREATE DATABASE ... OID, open
# to any role with CREATEDB; OIDs also wrap around) does not inherit them
$node->safe_psql('postgres', "CREATE DATABASE d4 OID = $d1oid");
$node->safe_psql('d4', 'CREATE EXTENSION idempotency');
$node->safe_psql('d4', q{SELECT idem_claim('d4-own', NULL)});
is($node->safe_psql('d4', 'SELECT claims_new IS NULL FROM idempotency_stats'), 't',
	"a new database with a dropped one's OID does not take its counters (no slot is free: NULL)");
is($node->safe_psql('d2', qq{SELECT coalesce(datname, '(dropped)') || ' ' || claims_new
	FROM idem_stats_databases() WHERE dbid = $d1oid}),
	'(dropped) 3', "the dropped database's counters are shown without the new one's name");
$node->safe_psql('postgres', 'DROP DATABASE d4');
$node->safe_psql('d2', 'SELECT idem_stats_reset()');
is($node->safe_psql('d2', q{SELECT count(*) FROM idem_stats_databases() WHERE datname IS NULL AND dbid IS NOT NULL}),
	'0', 'the reset frees its slot');
is($node->safe_psql('d2', 'SELECT claims_new FROM idempotency_stats'), '0', "and zeroes d2's counters");
$node->safe_psql('d3', q{SELECT idem_claim('d3-own', NULL)});
is($node->safe_psql('d3', 'SELECT claims_new FROM idempotency_stats'), '1',
	'd3 now has a slot of its own');

# a restart loses them
$node->restart;
is($node->safe_psql('d3', 'SELECT claims_new FROM idempotency_stats'), '0',
	'after a restart the counters start from zero');
is($node->safe_psql('d3', 'SELECT count(*) FROM idem_stats_databases()'), '0',
	'and no database has a slot until it counts');

$node->stop;
done_testing();

# Give the worker time for a few passes in postgres
sub usleep_ok
{
	select(undef, undef, undef, 0.5);
}
