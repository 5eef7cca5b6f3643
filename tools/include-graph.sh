#!/bin/sh
# tools/include-graph.sh [SRCDIR]: print the include graph of src/ between
# modules, bottom layer first, and exit 1 on a cycle or on an arrow into the
# entry point (the module whose .c defines _PG_init); then check the door
# to Citus: a .c file of src/ (not src/citus/) that names Citus at all must call
# a function citus/citus.h declares, so that everything that knows Citus is
# under src/citus/ and the core only asks it.  A module is a .c file
# and the .h of the same name (claim.c, claim.h: "claim"); a folder under
# src/ is one module (src/citus/: "citus").  An arrow A -> B: a file of A has
# #include "..." of a file of B.  Includes that are not files under SRCDIR
# (PostgreSQL's) are left out.  Called by make WERROR=1 (the test command's
# build); CONTRIBUTING.md, "Layout".
set -eu
src=${1:-$(dirname "$0")/../src}
cd "$src"
status=0
# one awk over every file: its #include "..." lines of files under SRCDIR
# are the arrows; the file that defines _PG_init is the entry point
find . -name '*.[ch]' | sed 's|^\./||' | LC_ALL=C sort | xargs awk '
BEGIN { for (i = 1; i < ARGC; i++) { known[ARGV[i]] = 1; print "file", ARGV[i] } }
/^[ \t]*#[ \t]*include[ \t]*"/ {
	t = $0; sub(/^[^"]*"/, "", t); sub(/".*/, "", t)
	d = FILENAME; if (d ~ /\//) sub(/\/[^\/]*$/, "", d); else d = "."
	if (d != "." && ((d "/" t) in known)) print "edge", FILENAME, d "/" t
	else if (t in known) print "edge", FILENAME, t
}
/^_PG_init\(/ { print "entry", FILENAME }' | awk '
function module(f) { if (f ~ /\//) { sub(/\/.*/, "", f); return f } sub(/\.[ch]$/, "", f); return f }
# depth-first from m; a module met again on the way is a cycle
function visit(m,   i, t) {
	state[m] = 1; path[++depth] = m
	for (i = 1; i <= nout[m]; i++) {
		t = out[m, i]
		if (state[t] == 1) {
			line = t
			for (j = depth; path[j] != t; j--) line = path[j] " -> " line
			cycles = cycles "  cycle: " t " -> " line "\n"; ncycles++
		} else if (state[t] == 0)
			visit(t)
		if (layer[t] + 1 > layer[m]) layer[m] = layer[t] + 1
	}
	depth--; state[m] = 2
}
$1 == "file" { m = module($2); if (!(m in seen)) { seen[m] = 1; mods[++nmods] = m } }
$1 == "entry" { entry = module($2) }
$1 == "edge" {
	a = module($2); b = module($3)
	if (a == b || (a, b) in arrow) next
	arrow[a, b] = 1; out[a, ++nout[a]] = b; narrows++
	from[b] = from[b] " " a
}
END {
	for (i = 1; i <= nmods; i++) { state[mods[i]] = 0; layer[mods[i]] = 0 }
	for (i = 1; i <= nmods; i++) if (state[mods[i]] == 0) visit(mods[i])
	for (l = 0; l <= nmods; l++)
		for (i = 1; i <= nmods; i++) {
			m = mods[i]
			if (layer[m] != l) continue
			s = ""
			for (k = 1; k <= nout[m]; k++) s = s " " out[m, k]
			printf "%d %-12s%s%s\n", l, m, (m == entry ? " (entry point)" : ""), (s == "" ? "" : " ->" s)
		}
	into = 0; n = split(from[entry], who, " ")
	printf "%d modules, %d arrows, %d into the entry point (%s), %d cycles\n", nmods, narrows, n, entry, ncycles
	bad = 0
	if (entry == "") { print "include-graph: no module defines _PG_init"; bad = 1 }
	if (n > 0) { print "include-graph: the entry point is included by:" from[entry]; bad = 1 }
	if (ncycles > 0) { printf "include-graph: circular includes:\n%s", cycles; bad = 1 }
	exit bad
}' || status=1

# the door to Citus: citus/citus.h's functions, and the files outside
# src/citus/ that name Citus
door=$(sed -n 's/^extern[^(]*[ *]\(Idem[A-Za-z0-9_]*\)(.*/\1/p' citus/citus.h | paste -sd'|' -)
askers=0
for f in $(ls *.c | LC_ALL=C sort); do
	grep -qi citus "$f" || continue
	if grep -Eq "($door)\(" "$f"; then
		askers=$((askers + 1))
	else
		echo "include-graph: $f names Citus but calls nothing of citus/citus.h (move it under src/citus/)"
		status=1
	fi
done
echo "$askers files outside src/citus/ ask citus/citus.h ($(echo "$door" | tr '|' ' '))"
exit $status
