# shellcheck shell=bash
# test/lib/tap.sh: reading node --test's TAP output.  test/lib/common.sh
# and test/edition/http.sh source it.

# The failed tests of the TAP output in file $1, a line each,
# "  | not ok NAME: MESSAGE (FILE:LINE)": the assertion's message on one
# line (240 characters at most) and the line of the test file it was
# thrown at (else the test's own).  Printed before a failed run's whole
# output, so that a log cut to its head and tail (as CI shows it) still
# says what failed and why.
tap_failures()
{
	awk '
	function indent(s) { return match(s, /[^ ]/) - 1 }
	function place(s) { return match(s, /[^\/( ]+\.js:[0-9]+/) ? substr(s, RSTART, RLENGTH) : "" }
	function flush() {
		if (name != "") {
			gsub(/[ \t]+/, " ", msg)
			sub(/^ /, "", msg)
			sub(/ $/, "", msg)
			gsub(/\047/, "", msg)
			if (length(msg) > 240) msg = substr(msg, 1, 240) "..."
			printf "  | not ok %s: %s (%s)\n", name, msg, (at != "" ? at : loc)
		}
		name = msg = loc = at = ""
		block = 0
	}
	/^ *not ok [0-9]+ - / { flush(); name = $0; sub(/^ *not ok [0-9]+ - /, "", name); next }
	name == "" { next }
	block && (/^ *$/ || indent($0) > key) {
		if (block == 1) msg = msg " " $0
		else if (at == "" && $0 !~ /\(node:/) at = place($0)
		next
	}
	{ block = 0 }
	/^ *\.\.\.$/ { flush(); next }
	/^ *location: / { loc = place($0) }
	/^ *error: / { v = $0; sub(/^ *error: /, "", v); key = indent($0); if (v ~ /^\|-?$/) block = 1; else msg = v }
	/^ *stack: / { key = indent($0); block = 2 }
	END { flush() }' "$1"
}

# A failed node --test run's log $1: its failed tests (tap_failures), then
# the whole of it.
show_tap()
{
	tap_failures "$1"
	cat "$1"
}
