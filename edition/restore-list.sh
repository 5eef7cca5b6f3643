#!/usr/bin/env bash
# edition/restore-list.sh: moving a database between the C build and the SQL
# edition (docs/managed.md, "Moving between editions").  Reads the table of
# contents of a dump (pg_restore -l DUMP) on stdin and writes it back with
# the entries that define the idempotency extension's objects commented
# out, whichever edition made the dump (the C build's or pg_tle's
# EXTENSION entry, the plain script's tables, type, sequence, view,
# functions, indexes, constraints, trigger, comments and grants, pg_tle's
# registration functions), so that pg_restore -L puts the rest into a
# database where the edition moved to is installed already:
#   kept   the rows of idempotency_keys (TABLE DATA) and the token
#          sequence's value (SEQUENCE SET), so tokens go on growing;
#          the rows of idempotency_row_security, whose restore puts the
#          recorded row level security policies back on the table, unless
#          the dump has the policies themselves (a plain-script source:
#          its idempotency_keys is an ordinary table, whose POLICY and ROW
#          SECURITY entries are kept instead); everything of the
#          application's
#   left   the key-lock secret of the SQL edition (the target has its own);
#          the SQL edition's idempotency_settings (the C build has no such
#          table: set them again on the target, docs/managed.md);
#          the schema the extension's table is in (CREATE SCHEMA: the
#          target has it, the edition being installed there first, as
#          Supabase's schema extensions is there already); the extension
#          whether named idempotency or HANDLE@idempotency (installed from
#          database.dev);
#          from a database with pg_tle: the pg_tle extension, its schema
#          pgtle and everything in it (the registration functions
#          pgtle."idempotency.control"() and "idempotency--V.sql"() that
#          pgtle.install_extension made, pgtle.feature_info's rows): the
#          target has pg_tle from the service with the edition registered
#          by the pgtle script, or no pg_tle at all (the C build's server).
#          Another extension installed with pg_tle keeps its EXTENSION
#          entry: install it in the target first, as this one.
#
#   pg_restore -l shop.dump | bash edition/restore-list.sh > shop.list
#   pg_restore -d shop -L shop.list shop.dump
set -euo pipefail
awk '
function ours(name) {
	# the name, then the owner (and the arguments of a function between them)
	return name ~ /^(idempotency_keys|idempotency_row_security|idempotency_token_seq|idempotency_status|idempotency_stats|idempotency_key_lock_secret|idempotency_key_lock_proof|idempotency_settings)( |$)/ ||
	       name ~ /^_?idem_[a-z0-9_]*\(/ || name ~ /^"?([A-Za-z0-9_-]+@)?idempotency(\.control|--[0-9.-]+\.sql)"?\(/
}
{ line[NR] = $0 }
/^[0-9]+; [0-9]+ [0-9]+ POLICY [^ ]+ idempotency_keys / { policies = 1 }
/^[0-9]+; [0-9]+ [0-9]+ TABLE DATA [^ ]+ idempotency_keys / { split($0, s, " "); home = s[6] }
END {
	for (i = 1; i <= NR; i++) {
		l = line[i]
		drop = 0
		if (l ~ /^[0-9]+; /) {
			n = split(l, f, " ")
			# f[1] "ID;" f[2] catalog oid, f[3] object oid, then the type (one or more words), schema, name..., owner
			rest = l
			sub(/^[0-9]+; [0-9]+ [0-9]+ /, "", rest)
			if (rest ~ /^EXTENSION - ([A-Za-z0-9_-]+@)?idempotency( |$)/ ||
			    rest ~ /^COMMENT - EXTENSION "?([A-Za-z0-9_-]+@)?idempotency"?( |$)/)
				# (HANDLE@idempotency: installed from database.dev)
				drop = 1
			else if (home != "" && rest ~ /^SCHEMA - / && split(rest, g, " ") >= 3 && g[3] == home)
				# the schema the edition is in: the target has it, the
				# edition being installed there first
				drop = 1
			else if (rest ~ /^(EXTENSION - |COMMENT - EXTENSION )pg_tle( |$)/ ||
			         rest ~ /^(SCHEMA - |(ACL|COMMENT) - SCHEMA )pgtle( |$)/ ||
			         rest ~ /^(TABLE DATA|SEQUENCE SET|SEQUENCE OWNED BY|FK CONSTRAINT|TABLE|VIEW|SEQUENCE|TYPE|DOMAIN|FUNCTION|PROCEDURE|AGGREGATE|INDEX|CONSTRAINT|TRIGGER|RULE|POLICY|ROW SECURITY|DEFAULT|ACL|COMMENT) pgtle /)
				# pg_tle itself: its extension, its schema and what is in
				# it (the registration functions pgtle.install_extension
				# made, pgtle.feature_info); the service creates pg_tle
				# in the target, a server without pg_tle has none
				drop = 1
			else if (rest ~ /^TABLE DATA /) {
				split(rest, g, " ")
				if (g[4] == "idempotency_key_lock_secret" || g[4] == "idempotency_key_lock_proof" || g[4] == "idempotency_settings") drop = 1
				else if (g[4] == "idempotency_row_security" && policies) drop = 1
			} else if (rest ~ /^SEQUENCE SET /) {
				drop = 0
			} else if (rest ~ /^(POLICY|ROW SECURITY) /) {
				drop = 0
			} else if (rest ~ /^(ACL|COMMENT) /) {
				# ACL schema TYPE name owner / COMMENT schema TYPE name owner
				split(rest, g, " ")
				obj = rest
				sub(/^(ACL|COMMENT) [^ ]+ (TABLE|SEQUENCE|FUNCTION|TYPE|VIEW|COLUMN|INDEX|CONSTRAINT|TRIGGER) /, "", obj)
				if (ours(obj) || obj ~ /^(idempotency_keys|idempotency_row_security)\./ || obj ~ /^(idempotency_keys|idempotency_row_security) /)
					drop = 1
				else if (rest ~ /^COMMENT [^ ]+ (INDEX|CONSTRAINT|TRIGGER) idempotency_/)
					drop = 1
			} else {
				obj = rest
				if (sub(/^(TABLE|VIEW|SEQUENCE|TYPE|FUNCTION|INDEX) [^ ]+ /, "", obj)) {
					if (ours(obj) || rest ~ /^INDEX [^ ]+ idempotency_(keys|key_lock_proof)_/) drop = 1
				} else if (sub(/^(CONSTRAINT|FK CONSTRAINT|TRIGGER|SEQUENCE OWNED BY) [^ ]+ /, "", obj)) {
					if (obj ~ /^(idempotency_keys|idempotency_row_security|idempotency_key_lock_secret|idempotency_key_lock_proof|idempotency_settings|idempotency_token_seq) /) drop = 1
				}
			}
		}
		print (drop ? ";" : "") l
	}
}'
