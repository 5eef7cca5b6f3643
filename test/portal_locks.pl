#!/usr/bin/perl
# test/portal_locks.pl SOCKET_DIR PORT USER DBNAME OBJSUBID
#
# Key locks taken by a portal of the extended protocol that is suspended
# (Execute with a row limit) and resumed across savepoints rolled back: the
# path to a key lock that SQL's cursors (sql/key_locks.sql) do not take, since
# only the protocol resumes the running statement's own portal.  Speaks the
# protocol itself (libpq has no Execute with a row limit): connects through
# the Unix socket without a password (trust), as USER, to DBNAME, which has
# the extension (the C build, or the SQL edition), and counts the backend's
# key locks in pg_locks (advisory, objsubid OBJSUBID: 7653 for the C build,
# 1 for the edition).  The claims' scope is the user's name, as under
# docs/tenants.md's row level security recipe; the claims are rolled back.
#
#   BEGIN; Bind the claims' SELECT to the unnamed portal; Execute 1 row
#   30 times: SAVEPOINT a; Execute 10 more rows; ROLLBACK TO a
#   -> the backend holds 1 key lock (each rollback let go of what it took)
#   Execute 100 more rows -> 64 (the cap)
#
# The SAVEPOINT and ROLLBACK TO go through named portals: a simple Query or a
# Bind of the unnamed portal would drop the suspended one.  Prints one line
# per check, "ok NAME" or "not ok NAME: why"; exits 1 when one failed.
use strict;
use warnings;
use IO::Socket::UNIX;

my ($dir, $port, $user, $db, $subid) = @ARGV;
die "usage: test/portal_locks.pl SOCKET_DIR PORT USER DBNAME OBJSUBID\n" unless defined $subid;
my $sock = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => "$dir/.s.PGSQL.$port")
  or die "portal_locks: cannot connect to $dir/.s.PGSQL.$port: $!\n";
my $failed = 0;
my $buf = '';

sub msg { my ($type, $body) = @_; print $sock $type . pack('N', length($body) + 4) . $body; }
sub z { return join('', map { "$_\0" } @_); }

# Read messages until one of the types in $stop; dies on an ErrorResponse.
sub until_
{
	my ($stop, $count) = @_;
	$count //= 1;
	my @got;
	while (1)
	{
		while (length($buf) < 5 || length($buf) < 1 + unpack('N', substr($buf, 1, 4)))
		{
			my $n = sysread($sock, my $chunk, 65536);
			die "portal_locks: the server closed the connection\n" unless $n;
			$buf .= $chunk;
		}
		my $type = substr($buf, 0, 1);
		my $len = unpack('N', substr($buf, 1, 4));
		my $body = substr($buf, 5, $len - 4);
		$buf = substr($buf, 1 + $len);
		if ($type eq 'E')
		{
			my %f = map { substr($_, 0, 1) => substr($_, 1) } grep { length } split /\0/, $body;
			die "portal_locks: ERROR $f{C}: $f{M}\n";
		}
		push @got, [ $type, $body ];
		return @got if index($stop, $type) >= 0 && --$count == 0;
	}
}

# A statement through a named statement and portal, closed afterwards; the
# first column of its first row.
sub named
{
	my ($sql) = @_;
	msg('P', z('n', $sql) . pack('n', 0));
	msg('B', z('n', 'n') . pack('nnn', 0, 0, 0));
	msg('E', z('n') . pack('N', 0));
	msg('C', 'P' . z('n'));
	msg('C', 'S' . z('n'));
	msg('H', '');
	for my $m (until_('3', 2))
	{
		next unless $m->[0] eq 'D';
		my $len = unpack('N', substr($m->[1], 2, 4));
		return substr($m->[1], 6, $len);
	}
	return undef;
}

sub execute_unnamed
{
	my ($rows) = @_;
	msg('E', z('') . pack('N', $rows));
	msg('H', '');
	until_('sC');    # PortalSuspended, or CommandComplete at the end
}

my $held = "SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND objsubid = $subid "
  . "AND pid = pg_catalog.pg_backend_pid() AND granted";

sub check
{
	my ($name, $want) = @_;
	my $got = named($held);
	if ($got eq $want) { print "ok $name\n"; }
	else { print "not ok $name: $got key locks held, expected $want\n"; $failed = 1; }
}

my $params = z('user', $user, 'database', $db) . "\0";
print $sock pack('NN', length($params) + 8, 196608) . $params;
until_('Z');
named('BEGIN');
msg('P', z('', "SELECT c.outcome FROM pg_catalog.generate_series(1, 100000) g, "
	  . "idem_claim('portal-' OPERATOR(pg_catalog.||) g, NULL, CAST(CURRENT_USER AS text)) c") . pack('n', 0));
msg('B', z('', '') . pack('nnn', 0, 0, 0));
execute_unnamed(1);
for (1 .. 30)
{
	named('SAVEPOINT a');
	execute_unnamed(10);
	named('ROLLBACK TO a');
}
check('portal_locks/rolled_back', 1);
execute_unnamed(100);
check('portal_locks/cap', 64);
msg('S', '');
until_('Z');
msg('X', '');
exit $failed;
