# IdemTest: helpers the TAP tests in test/t share.  A test loads it with
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use IdemTest;
# (as PostgreSQL's src/test/ssl/t loads SSL::Server), so that prove needs no
# extra -I, whoever runs it: make prove_installcheck or test/run.sh.
package IdemTest;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Utils;

our @EXPORT = qw(log_errors tenant_recipe keys_in_every_state set_worker_setting wait_passes);

# The ERROR, FATAL and PANIC lines of $node's server log from byte offset
# $from on, joined by newlines ('' when there are none).
sub log_errors
{
    my ($node, $from) = @_;
    my $log = slurp_file($node->logfile, $from);
    return join("\n", grep { /\b(ERROR|FATAL|PANIC):/ } split /\n/, $log);
}

# Sets idempotency.$name to $value with ALTER SYSTEM, reloads, and returns
# once the postmaster has read the file: a new session, which the postmaster
# forks with its own settings, shows the value.  The postmaster signals its
# children, the launcher among them, before it forks another session, and
# every pass it forks from then on starts with the value.  (A fixed sleep
# after the reload was not enough on a loaded machine.)
sub set_worker_setting
{
    my ($node, $name, $value) = @_;
    $node->safe_psql('postgres', "ALTER SYSTEM SET idempotency.$name = '$value'");
    $node->reload;
    $node->poll_query_until('postgres', "SELECT current_setting('idempotency.$name') = '$value'")
      or die "idempotency.$name did not become '$value' after a reload";
    return;
}

# Returns once $n more passes than now have finished (worker_passes in
# database postgres): with $n = 2, a pass that started after this call has
# finished, so no pass that began before a reload is still running.
sub wait_passes
{
    my ($node, $n) = @_;
    my $passes = $node->safe_psql('postgres', 'SELECT worker_passes FROM idempotency_stats');
    $node->poll_query_until('postgres',
        "SELECT worker_passes >= $passes + $n FROM idempotency_stats")
      or die "fewer than $n passes finished";
    return;
}

# The tenant recipe of docs/tenants.md (one scope per role), as SQL: row
# level security on idempotency_keys, its two policies, recorded with
# idem_save_row_security() so that pg_dump keeps them; and a role in
# idempotency_app for each name given (its scope).
sub tenant_recipe
{
    my @roles = @_;
    return join('', map { "CREATE ROLE $_ LOGIN IN ROLE idempotency_app;\n" } @roles) . q{
        ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
        ALTER TABLE idempotency_keys FORCE ROW LEVEL SECURITY;
        CREATE POLICY tenant_scope ON idempotency_keys TO idempotency_app
            USING (scope = current_user) WITH CHECK (scope = current_user);
        CREATE POLICY admin_all ON idempotency_keys TO idempotency_admin USING (true) WITH CHECK (true);
        SELECT idem_save_row_security();
    };
}

# A payments table and six keys, one in each state, as SQL: scope m1
# 'processing' (lease of an hour), 'stale' (lease run out, with a recovery
# point) and 'completed' (201, with its payment); scope m2 'declined' (a
# failure not retryable, 402) and 'retry' (a retryable one); scope m3 'exec'
# (idem_execute, with its payment; its arguments text, as the SQL edition
# takes them).
sub keys_in_every_state
{
    return q{
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
	    'INSERT INTO payments (key, amount) VALUES ($1, $2::int) RETURNING id', 'exec', '5');
    };
}

1;
