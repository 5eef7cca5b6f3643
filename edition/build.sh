#!/usr/bin/env bash
# make edition: the SQL edition's artifacts, built from the sources beside
# this script (one file per function in functions/, shared by both; nothing
# is copied by hand):
#   dist/idempotency--VERSION.sql           the extension script (what
#                                           CREATE EXTENSION runs under pg_tle)
#   dist/idempotency-pgtle--VERSION.sql     pgtle.install_extension(...) of it,
#                                           for RDS, Aurora and Supabase
#   dist/idempotency-sql--VERSION.sql       the plain script, for any server:
#                                           psql -f it into the current schema
#   dist/idempotency--FROM--TO.sql          for each updates/FROM--TO.sql (an
#                                           ALTER EXTENSION ... UPDATE step;
#                                           none yet), also added to the
#                                           pg_tle script as
#                                           pgtle.install_update_path(...)
#   dist/dbdev/                             the same scripts as a database.dev
#                                           package (Supabase's dbdev CLI:
#                                           dbdev add ... path --directory
#                                           it, dbdev publish --path it):
#                                           idempotency.control,
#                                           idempotency--VERSION.sql (and
#                                           each --FROM--TO.sql), README.md
# Sources, in the order they run: types.sql (roles, type, sequence),
# functions/*.sql (by name; a "--@ NAME ..." line in them is
# fragments/NAME.sql, see expand below), tables.sql (tables, index, trigger, view: they
# call functions), privileges.sql; extension.sql only in the extension
# script (pg_extension_config_dump).  Every function is created with
# SET search_path FROM CURRENT, and each script sets search_path first to
# the schema it installs into and pg_temp, last: pg_catalog, not named, is
# searched before both (PostgreSQL searches it first when the path does not
# name it), so the functions find pg_catalog's objects first, then the
# edition's in that schema, never anything a caller puts on their own
# search_path.  pg_catalog must not be named first: the first schema named
# is where CREATE puts what it makes (a superuser's install would fill
# pg_catalog; anyone else's fails there with "permission denied for schema
# pg_catalog").
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=$(sed -nE "s/^default_version = '([^']+)'/\1/p" "$here/../idempotency.control")
out=${1:-$here/dist}
mkdir -p "$out"
comment=$(sed -nE "s/^comment = '(.*)'$/\1/p" "$here/../idempotency.control")

# expand FILE: FILE, each line "<indent>--@ NAME ARG=VALUE ..." replaced by
# fragments/NAME.sql (its leading comment lines left out), every %ARG% in it
# replaced by VALUE (a VALUE has no space; ARG= gives ''), each line of it
# indented as the "--@" line was: SQL written once and used in several
# functions, where a function call would cost (a condition of a query that
# must stay a condition, a check inlined to save a call).  A fragment may
# hold such a line itself (expanded with the outer values put in it; not a
# third level).  A fragment that is missing, or a %NAME% left in an
# expansion, stops the build.
# request_hash_fast only where the planner cannot compute it: a custom plan,
# where DOC is a constant, folds what it can while planning, whatever the
# fragment's own bounds (the size it tests first is STABLE, the rest
# IMMUTABLE).  So its "--@" line comes right after an assignment's ":=" (a
# PL/pgSQL expression: planned without the values), or DOC is a column of a
# subquery fenced by OFFSET 0 (") AS ALIAS(" after it), said by
# PLANNED=fenced; else the build stops.
expand() {
	awk -v dir="$here/fragments" -v src="$1" '
	function fail(msg) { print "edition/build.sh: " src ":" FNR ": " msg > "/dev/stderr"; failed = 1; exit 1 }
	BEGIN {
		while ((getline l < src) > 0)
			if (match(l, /OFFSET 0\) AS [a-z_]+\(/)) fenced[substr(l, RSTART + 13, RLENGTH - 14)] = 1
		close(src)
	}
	/^[ \t]*--@ request_hash_fast / && last !~ /:=[ \t]*(COALESCE\()?[ \t]*$/ {
		doc = $0; sub(/.* DOC=/, "", doc); sub(/ .*/, "", doc)
		alias = doc; sub(/\..*/, "", alias)
		if (index($0, " PLANNED=fenced") == 0 || doc !~ /^[a-z_]+\.[a-z_]+$/ || !(alias in fenced))
			fail("request_hash_fast neither in an assignment nor on a column of a subquery fenced by OFFSET 0: a custom plan would compute it while planning")
	}
	# emit: the fragment a "--@" line (spec, without its indent) names,
	# each line indented by indent; a "--@" line in a fragment is expanded
	# the same way (after the outer ARG=VALUEs are put in it), one level deep
	function emit(spec, indent, depth,   f, g, nf, file, n, head, rc, line, i, eq, name, value, inner, at) {
		nf = split(spec, f, /[ \t]+/)
		file = dir "/" f[2] ".sql"
		n = 0; head = 1
		while ((rc = (getline line < file)) > 0) {
			if (head && line ~ /^--/ && line !~ /^--@ /) continue
			head = 0
			for (i = 3; i <= nf; i++) {
				eq = index(f[i], "=")
				if (eq < 2) fail("not ARG=VALUE: " f[i])
				name = "%" substr(f[i], 1, eq - 1) "%"; value = substr(f[i], eq + 1)
				while ((at = index(line, name)) > 0)
					line = substr(line, 1, at - 1) value substr(line, at + length(name))
			}
			if (line ~ /^[ \t]*--@ /) {
				if (depth > 0) fail(f[2] ": a fragment two fragments deep")
				inner = line; sub(/--@ .*/, "", inner)
				sub(/^[ \t]*/, "", line)
				split(line, g, /[ \t]+/)
				if (g[2] == f[2]) fail(f[2] ": a fragment naming itself")
				emit(line, indent inner, depth + 1); n++
				continue
			}
			if (match(line, /%[A-Z_]+%/)) fail(f[2] ": " substr(line, RSTART, RLENGTH) " not given")
			print (line == "" ? "" : indent line); n++
		}
		close(file)
		if (rc < 0 || n == 0) fail("no fragment " file)
	}
	/^[ \t]*--@ / {
		indent = $0; sub(/--@ .*/, "", indent)
		spec = $0; sub(/^[ \t]*/, "", spec)
		emit(spec, indent, 0)
		next
	}
	/[^ \t]/ && !/^[ \t]*(--|\/\*|\*)/ { last = $0 }
	{ print }
	END { if (failed) exit 1 }' "$1"
}

# jsonb_path_query (the set-returning one, and jsonb_path_query_tz) hands out its rows by
# list_delete_first on PostgreSQL 15, each moving the rest of the list: n
# rows cost n^2 (a request of 200,000 numbers hashed in 9 s, a response
# counted in minutes).  The sources use jsonb_path_query_array (with
# jsonb_array_elements) instead; the build stops on any other.
if grep -nE 'jsonb_path_query(_tz)?[[:space:]]*\(' "$here"/*.sql "$here"/functions/*.sql "$here"/fragments/*.sql >&2; then
	echo "edition/build.sh: jsonb_path_query(...) above: its rows cost n^2 on PostgreSQL 15; use jsonb_array_elements(jsonb_path_query_array(...))" >&2
	exit 1
fi

# version_function VERSION [replace]: idem__version(), which answers
# VERSION: the plain script's installation has no pg_extension row to say
# which version it is, so each plain upgrade script checks it first (and
# refuses another) and sets it last; the extension's scripts have it too
# (the same objects), each update step setting it as the plain one does.
# Its body is read, never run, by those checks (prosrc): a role that may
# create in the schema could have put a function of that name there.
version_function() {
	local create="CREATE FUNCTION"
	[ "${2:-}" = replace ] && create="CREATE OR REPLACE FUNCTION"
	cat <<EOF
/*
 * The version of the SQL edition installed in this schema (written by
 * edition/build.sh from idempotency.control; the plain upgrade scripts
 * read its body, SELECT 'VERSION'::pg_catalog.text, to check which version
 * they upgrade).
 */
$create idem__version() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path FROM CURRENT
AS \$idem__version\$SELECT '$1'::pg_catalog.text\$idem__version\$;
COMMENT ON FUNCTION idem__version() IS 'The version of the SQL edition installed in this schema.';
EOF
	# PUBLIC gets nothing of the edition's but the request hash (as the C
	# build); the grants stay through an update's CREATE OR REPLACE
	[ "${2:-}" = replace ] || cat <<EOF
REVOKE ALL ON FUNCTION idem__version() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem__version() TO idempotency_app;
EOF
}

# installed_version: a DO block's statements that set "found" to the
# version of the edition in the current schema (NULL: none), read from
# idem__version()'s body, "owner" to that function's owner, and "keys" to
# whether the schema has a relation idempotency_keys; nothing of the
# schema's is run.  A role that may create in the schema can write such a
# body too: an upgrade also checks that the function is the current
# user's (the objects' owner runs it)
installed_version() {
	cat <<'EOF'
    SELECT pg_catalog.substring(p.prosrc, '^SELECT ''([^'']*)''::pg_catalog\.text$'),
           pg_catalog.pg_get_userbyid(p.proowner)
      INTO found, owner
      FROM pg_catalog.pg_proc p
     WHERE p.oid OPERATOR(pg_catalog.=) pg_catalog.to_regprocedure(
               pg_catalog.quote_ident(pg_catalog.current_schema()) OPERATOR(pg_catalog.||) '.idem__version()');
    keys := pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema())
                                   OPERATOR(pg_catalog.||) '.idempotency_keys') IS NOT NULL;
EOF
}

# plain_begin NAME: a plain script's start: one transaction, search_path
# the current schema's (and pg_temp), then DO block NAME's head, up to
# installed_version's statements; the caller writes the rest of its body
plain_begin() {
	echo "BEGIN;"
	echo "SELECT pg_catalog.set_config('search_path',"
	echo "    pg_catalog.quote_ident(pg_catalog.current_schema())"
	echo "    OPERATOR(pg_catalog.||) ', pg_temp', true) AS search_path;"
	echo "DO \$$1\$"
	echo "DECLARE"
	echo "    found text;"
	echo "    owner name;"
	echo "    keys boolean;"
	echo "BEGIN"
	installed_version
}

body() {
	cat "$here/types.sql"
	for f in "$here"/functions/*.sql; do
		[ -e "$f" ] || continue
		printf '\n'
		expand "$f"
	done
	printf '\n'
	version_function "$version"
	printf '\n'
	cat "$here/tables.sql"
	printf '\n'
	cat "$here/privileges.sql"
}

ext=$out/idempotency--$version.sql
{
	echo "/* idempotency $version, SQL edition: extension script (generated by edition/build.sh) */"
	echo "SET search_path = @extschema@, pg_temp;"
	echo
	body
	printf '\n'
	cat "$here/extension.sql"
} >"$ext.tmp"
mv "$ext.tmp" "$ext"

# pg_tle: the extension script as a dollar-quoted string; the quote's tag
# must not occur in it
grep -q '\$_pgtle_\$' "$ext" && { echo "edition/build.sh: \$_pgtle_\$ occurs in the sources" >&2; exit 1; }
tle=$out/idempotency-pgtle--$version.sql
{
	echo "/*"
	echo " * idempotency $version, SQL edition, for pg_tle (generated by edition/build.sh)."
	echo " * As a role granted pgtle_admin:   psql -v ON_ERROR_STOP=1 -f $(basename "$tle")"
	echo " * then, in each database that uses it:   CREATE EXTENSION idempotency;"
	echo " */"
	echo "SELECT pgtle.install_extension("
	echo "  'idempotency',"
	echo "  '$version',"
	echo "  '${comment//\'/\'\'} (SQL edition)',"
	echo "\$_pgtle_\$"
	cat "$ext"
	echo "\$_pgtle_\$"
	echo ");"
	# (none left over from an earlier build)
	rm -f "$out"/idempotency--*--*.sql "$out"/idempotency-sql--*--*.sql
	# an update path for each edition/updates/FROM--TO.sql (the SQL
	# edition's ALTER EXTENSION idempotency UPDATE steps; none yet: 0.4.0 is
	# its first version), each also written as dist/idempotency--FROM--TO.sql
	for u in "$here"/updates/*--*.sql; do
		[ -e "$u" ] || continue
		step=$(basename "$u" .sql)
		from=${step%%--*}
		to=${step#*--}
		plainstep=$out/idempotency-sql--$step.sql
		grep -q '\$_pgtle_\$' "$u" && { echo "edition/build.sh: \$_pgtle_\$ occurs in $u" >&2; exit 1; }
		{
			echo "/* idempotency $from to $to, SQL edition: update script (generated by edition/build.sh) */"
			echo "SET search_path = @extschema@, pg_temp;"
			echo
			cat "$u"
			echo
			version_function "$to" replace
		} >"$out/idempotency--$step.sql"
		# the plain script's upgrade: the same step, in one transaction,
		# into the current schema, after checking that the edition there is
		# $from (there is no ALTER EXTENSION to know it)
		{
			echo "/*"
			echo " * idempotency $from to $to, SQL edition, plain upgrade script (generated by"
			echo " * edition/build.sh). Run in one transaction by the objects' owner, with"
			echo " * search_path set to the schema the plain script was installed into:"
			echo " *   PGOPTIONS='-c search_path=SCHEMA' psql -v ON_ERROR_STOP=1 -d DB -f $(basename "$plainstep")"
			echo " */"
			plain_begin idem_upgrade
			echo "    IF found IS DISTINCT FROM '$from' THEN"
			echo "        RAISE EXCEPTION USING"
			echo "            ERRCODE = 'object_not_in_prerequisite_state',"
			echo "            MESSAGE = pg_catalog.format('this script upgrades idempotency $from, but schema %I has %s',"
			echo "                                        pg_catalog.current_schema(),"
			echo "                                        CASE WHEN found IS NOT NULL THEN 'idempotency ' OPERATOR(pg_catalog.||) found"
			echo "                                             WHEN keys THEN 'an idempotency_keys table but not the SQL edition''s plain script'"
			echo "                                             ELSE 'no idempotency' END),"
			echo "            HINT = 'Set search_path to the schema the plain script was installed into, and run the upgrade scripts from its version on, in order.';"
			echo "    END IF;"
			echo "    -- a body any role that may create in the schema could have written:"
			echo "    -- the edition's own is its objects' owner's, who runs this script"
			echo "    IF owner OPERATOR(pg_catalog.<>) CURRENT_USER THEN"
			echo "        RAISE EXCEPTION USING"
			echo "            ERRCODE = 'insufficient_privilege',"
			echo "            MESSAGE = pg_catalog.format('idem__version() in schema %I is owned by role %I, not by the role running this script (%I)',"
			echo "                                        pg_catalog.current_schema(), owner, CURRENT_USER),"
			echo "            HINT = 'Run the upgrade scripts as the role that owns the objects of the SQL edition (SET ROLE to it).';"
			echo "    END IF;"
			echo "END"
			echo "\$idem_upgrade\$;"
			echo
			cat "$u"
			echo
			version_function "$to" replace
			echo
			echo "COMMIT;"
		} >"$plainstep"
		echo
		echo "SELECT pgtle.install_update_path('idempotency', '$from', '$to',"
		echo "\$_pgtle_\$"
		cat "$out/idempotency--$step.sql"
		echo "\$_pgtle_\$"
		echo ");"
	done
} >"$tle.tmp"
mv "$tle.tmp" "$tle"

# database.dev: a package directory as Supabase's dbdev CLI reads it
# (github.com/supabase/dbdev, cli/src/models.rs: one NAME.control, whose
# name is the extension's, NAME--VERSION.sql and NAME--FROM--TO.sql beside
# it, a README.md); dbdev add writes pgtle.install_extension of each script
# (under the name HANDLE@idempotency once published under HANDLE)
# dbdev reads a control file's quoted value up to the next quote, and
# refuses a line with a second "=" (cli/src/models.rs)
case $comment in *"'"* | *=*) echo "edition/build.sh: the comment in idempotency.control holds ' or =, which dbdev's control file parser does not take" >&2; exit 1 ;; esac
rm -rf "$out/dbdev"
mkdir -p "$out/dbdev"
cp "$ext" "$out/dbdev/"
for u in "$out"/idempotency--*--*.sql; do
	[ -e "$u" ] || continue
	cp "$u" "$out/dbdev/"
done
{
	echo "# idempotency extension, SQL edition (generated by edition/build.sh)"
	echo "comment = '${comment//\'/\'\'} (SQL edition)'"
	echo "default_version = '$version'"
	echo "relocatable = false"
	echo "superuser = false"
} >"$out/dbdev/idempotency.control"
sed "s/@VERSION@/$version/g" "$here/dbdev-README.md" >"$out/dbdev/README.md"

plain=$out/idempotency-sql--$version.sql
{
	echo "/*"
	echo " * idempotency $version, SQL edition, plain script (generated by edition/build.sh)."
	echo " * Installs into the current schema (the first of search_path), in one"
	echo " * transaction, as the role that is to own the objects (the database's owner):"
	echo " *   psql -v ON_ERROR_STOP=1 -d DB -f $(basename "$plain")"
	echo " */"
	echo "/* not over an installation: the upgrade scripts move one from version to version */"
	plain_begin idem_installed
	echo "    IF found IS NOT NULL OR keys THEN"
	echo "        RAISE EXCEPTION USING"
	echo "            ERRCODE = 'duplicate_object',"
	echo "            MESSAGE = pg_catalog.format('schema %I already has %s', pg_catalog.current_schema(),"
	echo "                                        CASE WHEN found IS NOT NULL THEN 'idempotency ' OPERATOR(pg_catalog.||) found"
	echo "                                             ELSE 'a relation idempotency_keys' END),"
	echo "            HINT = CASE WHEN found OPERATOR(pg_catalog.=) '$version' THEN 'It is installed: there is nothing to do.'"
	echo "                        WHEN found IS NOT NULL"
	echo "                        THEN 'To move it to $version, run the upgrade scripts idempotency-sql--FROM--TO.sql from its version on, in order.'"
	echo "                        ELSE 'Install into another schema; docs/managed.md, Moving between editions, moves keys from another installation.' END;"
	echo "    END IF;"
	echo "END"
	echo "\$idem_installed\$;"
	echo
	body
	echo
	echo "COMMIT;"
} >"$plain.tmp"
mv "$plain.tmp" "$plain"
echo "edition/build.sh: $ext, $tle, $plain, $out/dbdev/"
