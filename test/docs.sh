#!/usr/bin/env bash
# test/docs.sh: the documents as a user runs them.  Every ```sql block of
# README.md and docs/*.md (or of the files given), in document order, as
# written, through one psql session per document (ON_ERROR_STOP) on a fresh
# database of that document's own (docs_readme, docs_tenants, ...), and the
# output each block prints compared with the ```text block that follows it
# in the document.  The conventions (CONTRIBUTING.md, "The documents"):
#
#   ```sql ... ``` then, after blank lines only, ```text ... ```
#       the text block is what psql -q prints for the sql block (results,
#       and ERROR/DETAIL/HINT lines for an error the reader is shown):
#       compared line by line (trailing blanks ignored; NOTICEs and CONTEXT
#       lines are not printed).  A sql block without one must run without
#       error; what it prints is not compared.  A block whose text shows an
#       ERROR line runs with ON_ERROR_STOP off.  Every block must end its
#       last statement (a semicolon, or a backslash command).
#   <!-- excerpt: why -->     on the line right before the fence: the block
#       is not meant to run as it stands (Citus, a fragment); skipped
#   <!-- preload -->          runs only on a server with
#       shared_preload_libraries = 'idempotency' (skipped on the other)
#   <!-- no-preload -->       runs only on a server without it
#   <!-- alone: why -->       this block and every later one of the document
#       also run on their own, in a second fresh database (docs_NAME_alone),
#       with the same outputs: a part a reader may take without what comes
#       before it
#
# Each database gets CREATE EXTENSION idempotency first unless the blocks
# that run there create it themselves (README's do).  Roles are
# cluster-wide: run it on a throwaway server (bash test/run.sh docs starts
# two, one with the preload and one without).
#
#   PGHOST=... PGPORT=... bash test/docs.sh [--preload|--no-preload] [--keep-going] [FILE.md...]
#
# Connects with libpq's environment, as a superuser; --preload (the default)
# or --no-preload says which server it is (checked against the server).
# --keep-going runs every block even after an error, and reports every
# block that failed (for finding them all at once).  Prints one line per
# document that has sql blocks:
#   ok      README (10 blocks run, 1 skipped: 1 excerpt)
#   FAILED  docs/tenants (block 3 (docs/tenants.md:41) stopped on an error; 3 blocks run)
# after the diff or psql's output; exits 1 when one failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

CONFIG=preload
KEEP_GOING=0
FILES=()
for a in "$@"; do
	case $a in
	--preload) CONFIG=preload ;;
	--no-preload) CONFIG=no-preload ;;
	--keep-going) KEEP_GOING=1 ;;
	-*) echo "usage: bash test/docs.sh [--preload|--no-preload] [--keep-going] [FILE.md...]" >&2; exit 2 ;;
	*) FILES+=("$a") ;;
	esac
done
[ ${#FILES[@]} -gt 0 ] || FILES=(README.md docs/*.md)

PSQL=(psql -X -q -v ON_ERROR_STOP=1 -v SHOW_CONTEXT=never)
# NOTICEs (DROP ... IF EXISTS "skipping") depend on what ran before: not compared
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/idempotency-docs.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT

# the server must be what --preload / --no-preload says
preloaded=$("${PSQL[@]}" -At -d postgres -c "SHOW shared_preload_libraries") || exit 2
case ",${preloaded// /}," in
*,idempotency,*) [ "$CONFIG" = preload ] ;;
*) [ "$CONFIG" = no-preload ] ;;
esac || { echo "test/docs.sh --$CONFIG: the server's shared_preload_libraries is '$preloaded'" >&2; exit 2; }

# Split document $1 into $2/N.sql (the sql blocks, numbered from 1),
# $2/N.out (the text block following one) and $2/blocks: a line per sql
# block "N LINE MARKERS" (MARKERS: the comment words before it, or -).
extract()
{
	awk -v dir="$2" '
	function marker(s) {
		sub(/^[ \t]*<!--[ \t]*/, "", s); sub(/[ \t:].*$/, "", s)
		return (s ~ /^(excerpt|preload|no-preload|alone)$/) ? s : ""
	}
	!inb && /^[ \t]*```/ {
		match($0, /^[ \t]*/); indent = RLENGTH
		lang = substr($0, indent + 4); gsub(/[ \t]+$/, "", lang)
		inb = 1
		if (lang == "sql") {
			n++; file = dir "/" n ".sql"; printf "" >file
			print n, NR, (marks == "" ? "-" : marks) >(dir "/blocks")
		} else if (lang == "text" && after == n && n > 0) {
			file = dir "/" n ".out"; printf "" >file
		} else {
			file = ""
		}
		marks = ""; after = 0
		next
	}
	inb && /^[ \t]*```[ \t]*$/ { inb = 0; if (file ~ /\.sql$/) after = n; close(file); next }
	inb {
		if (file != "") {
			line = $0
			for (i = 0; i < indent && substr(line, 1, 1) == " "; i++) line = substr(line, 2)
			print line >file
		}
		next
	}
	/^[ \t]*<!--.*-->[ \t]*$/ { m = marker($0); if (m != "") marks = (marks == "" ? m : marks "," m); next }
	/^[ \t]*$/ { marks = ""; next }
	{ marks = ""; after = 0 }
	' "$1"
	touch "$2/blocks"
}

# Drop and create database $1 (with the extension unless $2 = no).
fresh_database()
{
	"${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" || return 1
	[ "$2" = no ] || "${PSQL[@]}" -d "$1" -c "CREATE EXTENSION idempotency"
}

# Trailing blanks off every line, blank lines off both ends.
normalize()
{
	sed -e 's/[ \t]*$//' "$1" | awk 'NF { for (; blank > 0; blank--) print ""; seen = 1; print; next } seen { blank++ }'
}

# Run blocks $3 (numbers) of document $1 (extracted into $2) in database
# $4 through one psql; compare each block's output with its text block.
# Sets WHY on failure.
run_blocks()
{
	local doc=$1 dir=$2 blocks=$3 db=$4 script=$2/$4.sql out=$2/$4.result n line stopped="" bad=""
	local stop=1
	[ "$KEEP_GOING" = 1 ] && stop=0
	WHY=""
	{
		echo "\\set ON_ERROR_STOP $stop"
		for n in $blocks; do
			echo "\\echo '@@docs-block $n@@'"
			if [ -f "$dir/$n.out" ] && grep -q '^ERROR:  ' "$dir/$n.out"; then
				echo '\set ON_ERROR_STOP 0'
				cat "$dir/$n.sql"
				echo "\\set ON_ERROR_STOP $stop"
			else
				cat "$dir/$n.sql"
			fi
		done
		echo "\\echo '@@docs-block end@@'"
	} >"$script"
	"${PSQL[@]}" -d "$db" -f "$script" >"$out" 2>&1
	# each block's output, error lines without psql's "psql:FILE:LINE: "
	awk -v dir="$dir" -v db="$db" '
		/^@@docs-block [0-9a-z]+@@$/ { f = dir "/" db "." substr($2, 1, length($2) - 2) ".actual"; printf "" >f; next }
		f != "" { sub(/^psql:[^:]*:[0-9]+: /, ""); print >f }' "$out"
	# psql stopped on an error: in the last block that started
	[ -f "$dir/$db.end.actual" ] ||
		stopped=$(ls "$dir/$db".*.actual 2>/dev/null | sed -E 's/.*\.([0-9]+)\.actual$/\1/' | grep -E '^[0-9]+$' | sort -n | tail -1)
	for n in $blocks; do
		line=$(awk -v n="$n" '$1 == n { print $2 }' "$dir/blocks")
		if [ ! -f "$dir/$db.$n.actual" ]; then
			bad="$bad, block $n ($doc:$line) not reached"
			break
		elif [ "$n" = "$stopped" ]; then
			echo "--- $doc:$line: psql stopped on an error"
			cat "$dir/$db.$n.actual"
			bad="$bad, block $n ($doc:$line) stopped on an error"
			break
		elif [ -f "$dir/$n.out" ]; then
			if ! diff -u --label "$doc:$line (the text block)" --label "as run" \
				<(normalize "$dir/$n.out") <(normalize "$dir/$db.$n.actual"); then
				bad="$bad, block $n ($doc:$line) output differs"
				[ "$KEEP_GOING" = 1 ] || break
			fi
		elif grep -q '^ERROR:  ' "$dir/$db.$n.actual"; then
			# only with --keep-going: an error no text block shows
			echo "--- $doc:$line: an error"
			grep -A3 '^ERROR:  ' "$dir/$db.$n.actual"
			bad="$bad, block $n ($doc:$line) failed"
		fi
	done
	WHY=${bad#, }
	[ -z "$bad" ]
}

# True when the statement text of block $1 ends its last statement (a
# semicolon or a backslash command), so the next block starts afresh.
ends_statement()
{
	awk '{ sub(/--.*$/, ""); sub(/[ \t]+$/, "") } NF { last = $0 }
		END { exit !(last ~ /;$/ || last ~ /^[ \t]*\\/ || last ~ /\\g[a-z]*( .*)?$/) }' "$1"
}

# True when one of blocks $2... (in $1) creates the extension.
creates_extension()
{
	local dir=$1 n
	shift
	for n in "$@"; do
		grep -qi '^ *CREATE EXTENSION idempotency' "$dir/$n.sql" && return 0
	done
	return 1
}

failed=0
for f in "${FILES[@]}"; do
	name=${f%.md}
	dir=$TMP/$(echo "$name" | tr '/' '_')
	mkdir -p "$dir"
	extract "$f" "$dir"
	[ -s "$dir/blocks" ] || continue
	db=docs_$(basename "$name" | tr 'A-Z.-' 'a-z__')
	run="" alone="" nrun=0 nexcerpt=0 nother=0 nalone=0 bad=""
	while read -r n line marks; do
		case ",$marks," in
		*,excerpt,*) nexcerpt=$((nexcerpt + 1)); continue ;;
		*,preload,*) [ "$CONFIG" = preload ] || { nother=$((nother + 1)); continue; } ;;
		*,no-preload,*) [ "$CONFIG" = no-preload ] || { nother=$((nother + 1)); continue; } ;;
		esac
		case ",$marks," in *,alone,*) [ -n "$alone" ] || alone=" " ;; esac
		ends_statement "$dir/$n.sql" || bad="${bad:-block $n, $f:$line: its last statement has no semicolon}"
		run="$run $n"
		nrun=$((nrun + 1))
		if [ -n "$alone" ]; then
			alone="$alone $n"
			nalone=$((nalone + 1))
		fi
	done <"$dir/blocks"
	skipped=$((nexcerpt + nother))
	what="$nrun block$([ "$nrun" = 1 ] || echo s) run"
	[ "$nalone" -gt 0 ] && what="$what ($nalone again alone)"
	if [ "$skipped" -gt 0 ]; then
		what="$what, $skipped skipped:"
		[ "$nexcerpt" -gt 0 ] && what="$what $nexcerpt excerpt"
		[ "$nexcerpt" -gt 0 ] && [ "$nother" -gt 0 ] && what="$what,"
		[ "$nother" -gt 0 ] && what="$what $nother $( [ "$CONFIG" = preload ] && echo 'no-preload only' || echo 'preload only')"
	fi
	result=ok
	if [ -n "$bad" ]; then
		WHY=$bad
		result=FAILED
	elif [ "$nrun" -gt 0 ]; then
		ext=yes
		creates_extension "$dir" $run && ext=no
		if ! fresh_database "$db" "$ext" >"$dir/setup.log" 2>&1; then
			WHY="could not create database $db"; cat "$dir/setup.log"; result=FAILED
		elif ! run_blocks "$f" "$dir" "$run" "$db"; then
			result=FAILED
		elif [ -n "${alone// /}" ]; then
			ext=yes
			creates_extension "$dir" $alone && ext=no
			if ! fresh_database "${db}_alone" "$ext" >"$dir/setup.log" 2>&1; then
				WHY="could not create database ${db}_alone"; cat "$dir/setup.log"; result=FAILED
			elif ! run_blocks "$f" "$dir" "$alone" "${db}_alone"; then
				WHY="alone: $WHY"
				result=FAILED
			fi
		fi
	fi
	if [ "$result" = ok ]; then
		printf 'ok      %s (%s)\n' "$name" "$what"
	else
		printf 'FAILED  %s (%s; %s)\n' "$name" "$WHY" "$what"
		failed=1
	fi
done
exit $failed
