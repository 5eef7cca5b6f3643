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

our @EXPORT = qw(log_errors);

# The ERROR, FATAL and PANIC lines of $node's server log from byte offset
# $from on, joined by newlines ('' when there are none).
sub log_errors
{
    my ($node, $from) = @_;
    my $log = slurp_file($node->logfile, $from);
    return join("\n", grep { /\b(ERROR|FATAL|PANIC):/ } split /\n/, $log);
}

1;
