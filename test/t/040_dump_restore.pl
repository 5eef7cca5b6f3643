# pg_dump and restore keep every key: rows in every state, byte for byte,
# and the token sequence's position, so a restored database never hands out
# a token twice.  Custom format with pg_restore, and plain format with psql.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
	CREATE EXTENSION idempotency;
	CREATE TABLE payments (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
	SELECT idem_claim('processing', '{"amount": 1}', 'm1', lease => '1 hour');
	SELECT idem_claim('stale', NULL, 'm1', lease => '1 ms');
	SELECT idem_checkpoint('stale', 'card-authorized', 'm1', (SELECT token FROM idempotency_keys WHERE key = 'stale'));
	BEGIN;
	SELECT idem_claim('completed', '{"amount": 300}', 'm1');
	INSERT INTO payments (key, amount) VALUES ('completed', 300);
	SELECT idem_complete('completed', 201, '{"payment_id": 1, "note": "é ✓"}', 'm1');
	SELECT idem_claim('declined', NULL, 'm2');
	SELECT idem_fail('declined', 'm2', response_code => 402, response => '{"error": "card_declined"}', retryable => false);
	SELECT idem_claim('retry', NULL, 'm2');
	SELECT idem_fail('retry', 'm2');
	COMMIT;
	SELECT idem_execute('exec', '{"amount": 5}', 'm3', 201,
	    'INSERT INTO payments (key, amount) VALUES ($1, $2) RETURNING id', 'exec', 5);
});

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
		q{SELECT has_function_privilege('idempotency_app', 'idem_claim(text, jsonb, text, interval, interval, boolean)', 'EXECUTE')
		     AND NOT has_function_privilege('public', 'idem_claim(text, jsonb, text, interval, interval, boolean)', 'EXECUTE')}),
		't', "$db: privileges are kept");
}

$node->stop;
done_testing();
