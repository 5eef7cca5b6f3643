# 001_exactly_once.pl: concurrent claims of shared keys pay exactly once.
#
# A smaller version of the load test bench/exactly_once.sh runs (8 clients
# x 1,000 claims over 50 keys): pgbench clients race to claim a few shared
# keys with test/workload/claim_contention.sql; each 'new' claim inserts a payment
# and completes the key in the same transaction, every other claim must
# replay.  Afterwards test/workload/exactly_once_check.sql must find exactly one
# 'new' and one payment per key, every key completed with its payment, and
# every replay equal (as jsonb) to the stored response.
#
# Rounds: 4 clients x 200 over 10 keys (simple protocol, superuser);
# 8 clients x 150 over 50 keys (prepared statements, as a login role that
# was only granted idempotency_app); and test/workload/claim_burst.sql, fresh keys
# every 100 ms with the claimant holding its transaction open, so that
# duplicates arrive while the first claim is uncommitted and must wait for
# it.  log_lock_waits shows that they did wait.

use strict;
use warnings;

use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $workload = "$FindBin::RealBin/../workload";
my $setup_sql = slurp_file("$workload/exactly_once_setup.sql");
my $check_sql = slurp_file("$workload/exactly_once_check.sql");
my $contention = slurp_file("$workload/claim_contention.sql");
my $burst = slurp_file("$workload/claim_burst.sql");

my $node = PostgreSQL::Test::Cluster->new('exactly_once');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'idempotency'
max_connections = 40
log_lock_waits = on
deadlock_timeout = 1ms
});
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');
$node->safe_psql('postgres',
	'CREATE ROLE bench_app LOGIN IN ROLE idempotency_app');

# Runs one round: fresh tables, pgbench, then every exactly-once check.
sub run_round
{
	my (%r) = @_;
	my $total = $r{clients} * $r{transactions};
	my $user = $r{user} ? "-U $r{user}" : '';

	$node->safe_psql('postgres', $setup_sql);

	my $log_offset = -s $node->logfile;

	$node->pgbench(
		"-n -c $r{clients} -j 2 -t $r{transactions} -M $r{mode} "
		  . "-D nkeys=$r{keys} $user",
		0,
		[
			qr{number of transactions actually processed: $total/$total},
			qr{number of failed transactions: 0 }
		],
		[qr{\A(?![\s\S]*(?:ERROR|FATAL|aborted))}],
		"$r{name}: pgbench runs $total transactions without an error",
		{ "$r{name}.sql" => $r{script} });

	my $checks = $node->safe_psql(
		'postgres', $check_sql,
		extra_params => [
			'-v', "nkeys=$r{check_keys}",
			'-v', "total=$total"
		]);
	my @lines = split /\n/, $checks;
	is(scalar @lines, 9, "$r{name}: all nine checks ran");
	foreach my $line (@lines)
	{
		my ($check, $ok, $found) = split /\|/, $line, 3;
		ok($ok eq 't', "$r{name}: $check") or diag("found: $found");
	}

	my ($payments, $keys, $replays) = split /\|/,
	  $node->safe_psql(
		'postgres', q{
		SELECT (SELECT count(*) FROM idem_bench.payments),
		       (SELECT count(DISTINCT key) FROM idem_bench.claims),
		       (SELECT count(*) FROM idem_bench.claims WHERE outcome = 'replay')});
	is($payments, $keys, "$r{name}: $payments payments for $keys keys");
	is($replays, $total - $keys,
		"$r{name}: every other claim ($replays) was a replay");

	my $log = slurp_file($node->logfile, $log_offset);
	unlike(
		$log,
		qr/(?:ERROR|FATAL|PANIC):|terminated by signal/,
		"$r{name}: no error in the server log");
	return $log;
}

run_round(
	name => 'contention_10',
	script => $contention,
	clients => 4,
	transactions => 200,
	keys => 10,
	check_keys => 10,
	mode => 'simple');

run_round(
	name => 'contention_50',
	script => $contention,
	clients => 8,
	transactions => 150,
	keys => 50,
	check_keys => 50,
	mode => 'prepared',
	user => 'bench_app');

my $log = run_round(
	name => 'burst',
	script => $burst,
	clients => 6,
	transactions => 150,
	keys => 3,
	check_keys => 0,
	mode => 'extended');
like(
	$log,
	qr/still waiting for/,
	'burst: duplicates waited for the uncommitted first claim');

# The keys stay claimed after the load: one more claim of a burst key
# replays the stored response, and a different request is refused (IK001).
my $first = q{
	WITH p AS (SELECT id, key, amount FROM idem_bench.payments ORDER BY id LIMIT 1)
	SELECT c.outcome, c.response_code, (c.response->>'payment_id')::bigint = p.id
	FROM p, LATERAL idem_claim(p.key,
		request => jsonb_build_object('order', split_part(p.key, '-', 2)::bigint,
		                              'amount', p.amount + %d),
		scope => 'idem-bench') AS c};
is($node->safe_psql('postgres', sprintf($first, 0)),
	'replay|201|t', 'a later claim of a burst key replays its payment');
my ($ret, $stdout, $stderr) =
  $node->psql('postgres', "\\set VERBOSITY verbose\n" . sprintf($first, 1));
like($stderr, qr/ERROR:  IK001:/,
	'a later claim of a burst key with another amount is refused with IK001');

$node->stop;

done_testing();
