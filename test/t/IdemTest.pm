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

our @EXPORT = qw(log_errors tenant_recipe);

# The ERROR, FATAL and PANIC lines of $node's server log from byte offset
# $from on, joined by newlines ('' when there are none).
sub log_errors
{
    my ($node, $from) = @_;
    my $log = slurp_file($node->logfile, $from);
    return join("\n", grep { /\b(ERROR|FATAL|PANIC):/ } split /\n/, $log);
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

1;
