# Crashes under load: never charge twice, never lose a key.
#
# pgbench clients pay in the in-transaction pattern and through idem_execute,
# over the same few keys, so many collide, while the test kills a backend with SIGKILL (the postmaster then
# restarts the whole cluster) and stops the server in immediate mode.  After
# every restart: no key has two payments, every completed key has exactly its
# payment, no payment lacks its completed key, no claim survived without its
# transaction, replays return the stored response, and amcheck finds nothing.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'idempotency'
restart_after_crash = on
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	CREATE EXTENSION amcheck;
	-- no unique constraint on key: a double charge would show as a second row
	CREATE TABLE payments (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
});

my $script = $node->basedir . '/pay.sql';
open my $fh, '>', $script or die;
print $fh q{
\set k :base + random(1, 5000)
BEGIN;
SELECT outcome = 'new' AS is_new FROM idem_claim('key-' || :k, jsonb_build_object('amount', :k * 100), 'crash') \gset
\if :is_new
INSERT INTO payments (key, amount) VALUES ('key-' || :k, :k * 100) RETURNING id \gset
SELECT idem_complete('key-' || :k, 201, jsonb_build_object('payment_id', :id), 'crash');
\endif
COMMIT;
};
close $fh;

# the same payments through idem_execute (its short way for a new key runs
# the INSERT in a subtransaction, then writes the key row completed), mixed
# with the script above on the same keys
my $exec_script = $node->basedir . '/pay_exec.sql';
open $fh, '>', $exec_script or die;
print $fh q{
\set k :base + random(1, 5000)
SELECT outcome FROM idem_execute('key-' || :k, jsonb_build_object('amount', :k * 100), 'crash', 201, 'INSERT INTO payments (key, amount) VALUES ($1, $2) RETURNING id AS payment_id', 'key-' || :k, :k * 100);
};
close $fh;

# pgbench in the background; it stops by itself when the server goes away
my ($stdout, $stderr);
# each load its own 5,000 keys (base), so that new keys keep coming while
# the server dies, many of them claimed by two clients at once
sub start_load
{
	my ($base) = @_;
	($stdout, $stderr) = ('', '');
	my $h = IPC::Run::start(
		[ 'env', 'PGAPPNAME=pgbench', 'pgbench', '-n', '-c', '6', '-j', '2', '-T', '6', '-D', "base=$base", '-f', $script, '-f', $exec_script,
		  '-h', $node->host, '-p', $node->port, 'postgres' ],
		'>', \$stdout, '2>', \$stderr);
	return $h;
}

sub check_invariants
{
	my ($when) = @_;
	is($node->safe_psql('postgres',
		q{SELECT count(*) FROM (SELECT key FROM payments GROUP BY key HAVING count(*) > 1) d}),
		'0', "$when: no key has two payments");
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM idempotency_keys k
		WHERE k.scope = 'crash' AND k.status = 'completed'
		  AND NOT EXISTS (SELECT FROM payments p
		                  WHERE p.key = k.key AND p.id = (k.response->>'payment_id')::bigint)}),
		'0', "$when: every completed key has exactly its payment");
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM payments p
		WHERE NOT EXISTS (SELECT FROM idempotency_keys k
		                  WHERE k.scope = 'crash' AND k.key = p.key AND k.status = 'completed')}),
		'0', "$when: no payment lacks its completed key");
	is($node->safe_psql('postgres',
		q{SELECT count(*) FROM idempotency_keys WHERE scope = 'crash' AND status <> 'completed'}),
		'0', "$when: no claim outlived its transaction");
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM idempotency_keys k,
		     LATERAL idem_claim(k.key, jsonb_build_object('amount', split_part(k.key, '-', 2)::int * 100), 'crash') c
		WHERE k.scope = 'crash' AND (c.outcome <> 'replay' OR c.response <> k.response OR c.response_code <> 201)}),
		'0', "$when: every completed key replays its stored response");
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM (
		  SELECT bt_index_check(c.oid, true)
		  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		  WHERE i.indrelid IN ('idempotency_keys'::regclass, 'payments'::regclass)) s}),
		'3', "$when: amcheck bt_index_check (heapallindexed) passes on every index (3: the keys' two, the payments' one)");
	is($node->safe_psql('postgres', q{
		SELECT (SELECT count(*) FROM verify_heapam('idempotency_keys'))
		     + (SELECT count(*) FROM verify_heapam('payments'))}),
		'0', "$when: verify_heapam finds nothing");
}

# -- kill -9 of a backend under load, three times
for my $round (1 .. 3)
{
	my $load = start_load($round * 10000);
	$node->poll_query_until('postgres',
		"SELECT count(*) >= 3 FROM pg_stat_activity WHERE application_name = 'pgbench' AND state <> 'idle'")
	  or BAIL_OUT("pgbench did not get going: $stderr");
	select(undef, undef, undef, 1.0);
	my $victim = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' ORDER BY random() LIMIT 1");
	kill 'KILL', $victim if $victim;
	$load->finish;
	$node->poll_query_until('postgres', 'SELECT 1', '1')
	  or BAIL_OUT('server did not come back after kill -9');
	check_invariants("after kill -9 #$round");
}

# -- immediate shutdown under load
my $load = start_load(40000);
$node->poll_query_until('postgres',
	"SELECT count(*) >= 3 FROM pg_stat_activity WHERE application_name = 'pgbench' AND state <> 'idle'");
select(undef, undef, undef, 1.0);
$node->stop('immediate');
$load->finish;
$node->start;
check_invariants('after an immediate shutdown');
cmp_ok($node->safe_psql('postgres', q{SELECT count(*) FROM payments}), '>', 0,
	'the load did make payments');
# a row idem_execute wrote the short way has updated_at = created_at; the
# explicit pattern's rows were updated by idem_complete
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE updated_at = created_at) > 0 AND count(*) FILTER (WHERE updated_at > created_at) > 0
	FROM idempotency_keys WHERE scope = 'crash'}),
	't', 'keys were paid both through idem_execute\'s short way and through claim and complete');

# -- an uncommitted claim vanishes with the crash, a committed one survives
$node->safe_psql('postgres', q{SELECT idem_claim('committed', NULL, 'single', lease => '1 hour')});
my $bg = $node->background_psql('postgres', on_error_stop => 0);
$bg->query_safe('BEGIN');
$bg->query_safe(q{SELECT idem_claim('uncommitted', NULL, 'single')});
$node->stop('immediate');
$bg->quit;
$node->start;
is($node->safe_psql('postgres', q{SELECT count(*) FROM idem_lookup('uncommitted', 'single')}),
	'0', 'an uncommitted claim is gone after the crash');
is($node->safe_psql('postgres', q{SELECT status FROM idem_lookup('committed', 'single')}),
	'processing', 'a committed claim survives it');

# -- the client lost its connection around COMMIT: it cannot know whether its
# payment committed, so it retries with the same key.  If the crash came before
# the commit, the retry is new (and pays once); if after, the retry replays.
$bg = $node->background_psql('postgres', on_error_stop => 0);
$bg->query_safe('BEGIN');
$bg->query_safe(q{SELECT idem_claim('lost-before', '{"amount": 7}', 'single')});
$bg->query_safe(q{INSERT INTO payments (key, amount) VALUES ('lost-before', 7)});
$node->stop('immediate');
$bg->quit;
$node->start;
is($node->safe_psql('postgres', q{SELECT outcome FROM idem_claim('lost-before', '{"amount": 7}', 'single')}),
	'new', 'crash before COMMIT: the retry is new');
is($node->safe_psql('postgres', q{SELECT count(*) FROM payments WHERE key = 'lost-before'}),
	'0', 'and the first attempt left no payment');

$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idem_claim('lost-after', '{"amount": 8}', 'single');
	INSERT INTO payments (key, amount) VALUES ('lost-after', 8);
	SELECT idem_complete('lost-after', 201, '{"paid": true}', 'single');
	COMMIT;
});
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres',
	q{SELECT outcome || ' ' || response FROM idem_claim('lost-after', '{"amount": 8}', 'single')}),
	'replay {"paid": true}', 'crash after COMMIT: the retry replays');
is($node->safe_psql('postgres', q{SELECT count(*) FROM payments WHERE key = 'lost-after'}),
	'1', 'and there is one payment');

$node->stop;
done_testing();
