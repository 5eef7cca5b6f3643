#!/usr/bin/env bash
# test/edition/install.sh PG_BIN DIR PORT: the SQL edition installed as the
# users of managed PostgreSQL install it, never as a superuser, on one
# throwaway server (data and socket in DIR, port PORT) run from PG_BIN, a
# PostgreSQL without the C build's files and with pg_tle built in
# (test/edition/prepare.sh makes one).  As the postgres OS user, after
# make edition (edition/dist/).  Prints "ok NAME", "not ok NAME" (with
# "# " lines saying why) or "skip NAME (why)" per check; exits non-zero
# when one failed.
#
# A superuser does only what the service does for its customers: start the
# server with shared_preload_libraries = 'pg_tle' (and pg_cron where it is
# installed), CREATE EXTENSION pg_tle / pg_cron, create the service's admin
# roles, and give a database's owner nothing but the database.  Then:
#   plain/*   the plain script (Cloud SQL, Azure, Neon): a database owner
#             with no other privilege, while the roles idempotency_app and
#             idempotency_admin do not exist, is refused with a hint and
#             nothing is left; an owner with CREATEROLE (as Cloud SQL's
#             cloudsqlsuperuser, Neon's owner role) installs and creates the
#             roles; the first owner then installs, the roles now being
#             there (as the service's admin role would have made them)
#   pgtle/*   pg_tle (RDS, Aurora): rds_admin (NOSUPERUSER CREATEROLE
#             CREATEDB, granted pgtle_admin) runs the generated
#             idempotency-pgtle script; the database's owner, no superuser,
#             runs CREATE EXTENSION idempotency; update paths (one per
#             edition/updates/FROM--TO.sql: none yet)
#   plain/version, pgtle/version, plain/installed-twice, updates/*: the
#             version each installation records (idem__version()), and
#             the update machinery run on a copy of the sources with one
#             made-up step: the plain upgrade script and the pg_tle path
#   readme/*  README's psql lines for a managed service (Install), as
#             written: the pg_tle one as rds_admin, the plain one as a
#             database owner with CREATEROLE
#   dbdev/*   database.dev (Supabase): the migration Supabase's dbdev CLI
#             writes from edition/dist/dbdev (dbdev_add below), under the
#             name a published package has (HANDLE@idempotency) into schema
#             extensions, run by supa_admin (NOSUPERUSER CREATEROLE
#             CREATEDB, granted pgtle_admin: Supabase's postgres role); the
#             package README's SQL blocks (grants, then its example as the
#             service: new, then replay); the database dumped by pg_dump and
#             restored with edition/restore-list.sh's list into a second one
#             where the same migration ran: the same rows, the same replay;
#             the migration run again stops before its drop extension
#   each installation: an application role granted idempotency_app
#             claims, completes, replays; PUBLIC reaches nothing; the
#             application cannot call idem_expire or idem_resolve, a role
#             granted idempotency_admin can; (pgtle) the tenant recipe of
#             docs/tenants.md, the table's owner running it
#   cron/*    pg_cron runs SELECT idem_expire(100000) as a role granted
#             idempotency_admin and deletes a row past its expires_at (1
#             second schedule with pg_cron 1.5 and later, '* * * * *'
#             before: the wait is polled, up to 150 s); skipped where pg_cron
#             is not installed
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_BIN=${1:?usage: test/edition/install.sh PG_BIN DIR PORT}
DIR=${2:?usage: test/edition/install.sh PG_BIN DIR PORT}
PORT=${3:?usage: test/edition/install.sh PG_BIN DIR PORT}
export PATH="$PG_BIN:$PATH"
version=$(sed -nE "s/^default_version = '([^']+)'/\1/p" "$root/idempotency.control")
PLAIN=$root/edition/dist/idempotency-sql--$version.sql
TLE=$root/edition/dist/idempotency-pgtle--$version.sql
DATA=$DIR/data
failed=0
# shellcheck source=test/edition/lib.sh
. "$root/test/edition/lib.sh"
# the functions the C build keeps from PUBLIC
KEPT=$(sed -nE 's/^REVOKE ALL ON FUNCTION ([a-z_]+)\(.*FROM PUBLIC;$/\1/p' "$root/edition/privileges.sql" | sort -u | paste -sd ' ')

ok() { echo "ok $1"; }
skip() { echo "skip $1"; }

# check NAME WANT ROLE DB SQL: the output of SQL must be WANT
check() {
	local name=$1 want=$2 got
	got=$(q "$3" "$4" -c "$5")
	if [ "$got" = "$want" ]; then ok "$name"; else notok "$name" "want: $want
got:  $got"; fi
}
# refused NAME SQLSTATE ROLE DB SQL [MESSAGE]: SQL must fail with SQLSTATE
# (and that message)
refused() {
	local name=$1 want="ERROR:  $2${6:+: $6}" got
	got=$(printf '\\set VERBOSITY verbose\n%s\n' "$5" | q "$3" "$4" -f - 2>&1)
	case $got in
	*"$want"*) ok "$name" ;;
	*) notok "$name" "want: $want
got:  $got" ;;
	esac
}

# anon_reaches DB ROLE SCHEMA: the installing role's default privileges
# (Supabase's: ALL to anon) left no grant to anon on the edition's objects
# (its names: the application's own may keep theirs)
anon_reaches() {
	check "$1/default-privileges-revoked (the installer's default privileges gave anon ALL; none is left)" "" "$2" "$1" \
		"SELECT string_agg(x, ' ' ORDER BY x) FROM (
		   SELECT c.oid::regclass::text AS x FROM pg_class c, aclexplode(c.relacl) a
		    WHERE c.relnamespace = '$3'::regnamespace AND a.grantee = 'anon'::regrole AND c.relname ~ '^idempotency_'
		   UNION SELECT p.oid::regprocedure::text FROM pg_proc p, aclexplode(p.proacl) a
		    WHERE p.pronamespace = '$3'::regnamespace AND a.grantee = 'anon'::regrole AND p.proname ~ '^_?idem_'
		   UNION SELECT t.oid::regtype::text FROM pg_type t, aclexplode(t.typacl) a
		    WHERE t.typnamespace = '$3'::regnamespace AND a.grantee = 'anon'::regrole AND t.typname ~ '^idempotency_') s"
}

if [ ! -f "$PLAIN" ] || [ ! -f "$TLE" ]; then notok "edition (no $PLAIN: make edition first)"; exit 1; fi
pkglib=$(pg_config --pkglibdir)
sharedir=$(pg_config --sharedir)
if [ -e "$sharedir/extension/idempotency.control" ] || [ -e "$pkglib/idempotency.so" ]; then
	notok "server (the C build is installed in $PG_BIN's PostgreSQL: pg_tle would refuse, and a test could run the C build; use test/edition/prepare.sh)"
	exit 1
fi
if [ ! -f "$pkglib/pg_tle.so" ]; then
	notok "server (pg_tle is not installed in $pkglib: test/edition/prepare.sh builds it)"
	exit 1
fi
preload=pg_tle
CRON=""
[ -f "$pkglib/pg_cron.so" ] && CRON=1 && preload="pg_tle,pg_cron"

edition_server server "listen_addresses = ''" "shared_preload_libraries = '$preload'" \
	"cron.database_name = 'payments'" "cron.use_background_workers = on" "max_worker_processes = 16"

# --- the service's part, as the superuser ---------------------------------
# rds_admin stands for RDS's master user (rds_superuser), svc_admin for
# Cloud SQL's cloudsqlsuperuser / Azure's azure_pg_admin / Neon's
# neon_superuser: none is a superuser
if ! q postgres postgres >"$DIR/setup.log" <<'SQL'
CREATE ROLE rds_admin LOGIN NOSUPERUSER CREATEROLE CREATEDB;
CREATE ROLE svc_admin LOGIN NOSUPERUSER CREATEROLE CREATEDB;
CREATE ROLE owner_plain LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB;
CREATE ROLE owner_cr LOGIN NOSUPERUSER CREATEROLE NOCREATEDB;
CREATE DATABASE shop_plain OWNER owner_plain;
CREATE DATABASE shop_cr OWNER owner_cr;
REVOKE ALL ON DATABASE shop_plain, shop_cr FROM PUBLIC;
CREATE ROLE outsider LOGIN;
CREATE ROLE anon NOLOGIN;
SQL
then
	notok "server (the service's roles and databases)" "$(cat "$DIR/setup.log")"
	exit 1
fi
# anon_defaults DB ROLE: Supabase's default privileges (its initial schema,
# run as postgres): ALL on what ROLE creates in DB, in any schema, to anon
anon_defaults() {
	local t
	for t in TABLES SEQUENCES FUNCTIONS TYPES; do
		q postgres "$1" -c "ALTER DEFAULT PRIVILEGES FOR ROLE $2 GRANT ALL ON $t TO anon" || return 1
	done
}
if ! out=$(anon_defaults shop_plain owner_plain && anon_defaults shop_cr owner_cr); then
	notok "server (default privileges to anon)" "$out"
	exit 1
fi

# --- plain script ----------------------------------------------------------
# installs the plain script as role $1 into database $2 (its public schema)
plain_install() { q "$1" "$2" -f "$PLAIN"; }

# a schema every role may create in (public before PostgreSQL 15): refused,
# nothing left
q postgres shop_plain -c "GRANT CREATE ON SCHEMA public TO PUBLIC" >/dev/null
out=$(printf '\\set VERBOSITY verbose\n\\i %s\n' "$PLAIN" | q owner_plain shop_plain -f - 2>&1)
left=$(q owner_plain shop_plain -c "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace")
q postgres shop_plain -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC" >/dev/null
if [[ $out == *"ERROR:  42501: every role may create objects in schema public, where idempotency would be installed"* ]] &&
	[[ $out == *"HINT:  REVOKE CREATE ON SCHEMA public FROM PUBLIC;"* ]] && [ "$left" = 0 ]; then
	ok "plain/public-create-refused (42501 and the hint; nothing left)"
else
	notok "plain/public-create-refused" "objects left: $left
$out"
fi

# a schema another role owns: a warning naming it, first (this owner then
# stops at the roles it may not create, below)
q postgres shop_plain -c "CREATE SCHEMA theirs AUTHORIZATION outsider" -c "GRANT USAGE, CREATE ON SCHEMA theirs TO owner_plain" >/dev/null
out=$(printf 'SET search_path = theirs;\n\\i %s\n' "$PLAIN" | q owner_plain shop_plain -f - 2>&1)
q postgres shop_plain -c "DROP SCHEMA theirs CASCADE" >/dev/null 2>&1
if [[ $out == *"WARNING:  roles outsider (its owner) may create objects in schema theirs, where idempotency is installed"* ]] &&
	[[ $out != *"every role may create"* ]]; then
	ok "plain/schema-of-another-owner-warned (the warning names outsider)"
else
	notok "plain/schema-of-another-owner-warned" "$out"
fi

# owner without CREATEROLE, roles missing: refused, with the hint, nothing left
out=$(printf '\\set VERBOSITY verbose\n\\i %s\n' "$PLAIN" | q owner_plain shop_plain -f -)
left=$(q owner_plain shop_plain -c "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace")
if [[ $out == *"ERROR:  42501: the roles idempotency_app and idempotency_admin must exist before role owner_plain can install idempotency"* ]] &&
	[[ $out == *"HINT:  As a role with CREATEROLE"* ]] && [ "$left" = 0 ]; then
	ok "plain/no-createrole-roles-missing (refused with 42501 and the hint; nothing left)"
else
	notok "plain/no-createrole-roles-missing" "objects left: $left
$out"
fi

# owner with CREATEROLE: installs, creating the roles
if out=$(plain_install owner_cr shop_cr); then
	check "plain/createrole (the owner installed; the roles exist, NOLOGIN, admin in app)" "2|t" owner_cr shop_cr \
		"SELECT count(*), bool_and(NOT rolcanlogin) FILTER (WHERE true) AND pg_has_role('idempotency_admin', 'idempotency_app', 'MEMBER')
		 FROM pg_roles WHERE rolname IN ('idempotency_app', 'idempotency_admin')"
else
	notok "plain/createrole (the plain script failed)" "$out"
fi

# owner without CREATEROLE, roles there now (made by a role with CREATEROLE)
if out=$(plain_install owner_plain shop_plain); then
	ok "plain/no-createrole-roles-there (the owner installed)"
else
	notok "plain/no-createrole-roles-there (the plain script failed)" "$out"
fi

# owner with CREATEROLE, inside a transaction of its own that made a table
# of the application and granted it, with psql's ON_ERROR_ROLLBACK (each
# statement in a subtransaction) and without: the edition's objects lose
# what the default privileges gave, the application's table keeps its
# grants
for rb in on off; do
	db=shop_tx_$rb
	if out=$(q postgres postgres -c "CREATE DATABASE $db OWNER owner_cr") && anon_defaults "$db" owner_cr &&
		out=$(printf 'BEGIN;\nCREATE TABLE orders (i int);\nGRANT SELECT ON orders TO outsider;\n\\i %s\n' "$PLAIN" |
			q owner_cr "$db" -v ON_ERROR_ROLLBACK=$rb -f - 2>&1); then
		anon_reaches "$db" owner_cr public
		check "$db/application-grants-kept (the application's table, made in the same transaction, keeps its grants)" "t|t" owner_cr "$db" \
			"SELECT has_table_privilege('outsider', 'orders', 'SELECT'), has_table_privilege('anon', 'orders', 'DELETE')"
	else
		notok "$db/plain-in-a-transaction (the plain script inside the owner's transaction, ON_ERROR_ROLLBACK $rb)" "$out"
	fi
done

# --- pg_tle ----------------------------------------------------------------
# the service: pg_tle in the database, pgtle_admin for the master user;
# the master user: the owner role and the database
tle_ready=""
if out=$(q postgres postgres -c "GRANT pg_signal_backend TO rds_admin" 2>&1) &&
	out=$(q rds_admin postgres <<'SQL'
CREATE ROLE app_owner LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB;
GRANT app_owner TO rds_admin;
CREATE DATABASE payments OWNER app_owner;
REVOKE ALL ON DATABASE payments FROM PUBLIC;
SQL
	) && out=$(q postgres payments -c "CREATE EXTENSION pg_tle" -c "GRANT pgtle_admin TO rds_admin" &&
		anon_defaults payments app_owner); then
	if out=$(q rds_admin payments -f "$TLE"); then
		ok "pgtle/install_extension (rds_admin, granted pgtle_admin, ran $(basename "$TLE"))"
		if out=$(q app_owner payments -c "CREATE EXTENSION idempotency"); then
			tle_ready=1
			check "pgtle/create-extension (the database's owner, no superuser; the objects are its own)" \
				"$version|app_owner|app_owner" app_owner payments \
				"SELECT e.extversion, pg_get_userbyid(e.extowner), pg_get_userbyid(c.relowner)
				 FROM pg_extension e, pg_class c WHERE e.extname = 'idempotency' AND c.oid = 'idempotency_keys'::regclass"
		else
			notok "pgtle/create-extension (CREATE EXTENSION idempotency as app_owner)" "$out"
		fi
	else
		notok "pgtle/install_extension (rds_admin ran $(basename "$TLE"))" "$out"
	fi
else
	notok "pgtle (the service's part: pg_tle, rds_admin, the database)" "$out"
fi
nupdates=$(find "$root/edition/updates" -name '*--*.sql' 2>/dev/null | wc -l)
ncalls=$(grep -c '^SELECT pgtle.install_update_path(' "$TLE")
if [ "$nupdates" -eq 0 ]; then
	# nothing to check beyond the script's having no update path
	if [ "$ncalls" -eq 0 ]; then
		skip "pgtle/update-paths (edition/updates/ has no FROM--TO.sql: $version is the edition's first version)"
	else
		notok "pgtle/update-paths ($ncalls install_update_path calls, no edition/updates/*.sql)"
	fi
elif [ -n "$tle_ready" ]; then
	# every version is reachable from the first, and the update runs
	latest=$(q app_owner payments -c "SELECT max(target::text COLLATE \"C\") FROM pgtle.extension_update_paths('idempotency') WHERE path IS NOT NULL")
	check "pgtle/update-paths ($nupdates of them, one pgtle.install_update_path each)" "$nupdates" app_owner payments \
		"SELECT count(*) FROM pgtle.extension_update_paths('idempotency') WHERE path IS NOT NULL AND source = '$version'"
	[ -n "$latest" ] && check "pgtle/alter-extension-update (to $latest)" "$latest" app_owner payments \
		"ALTER EXTENSION idempotency UPDATE TO '$latest'; SELECT extversion FROM pg_extension WHERE extname = 'idempotency'"
fi

# --- docs/managed.md's schema of its own -----------------------------------
# the sh block after its "(plain/own-schema)" marker, each psql line run as
# written from the repository's root by owner_cr, its "-d shop" a database
# of its own; then the service, its search_path as the text after the block
# says, claims, and a role with no grant is refused naming the schema before
# it can queue a lock on the table (CREATE RULE)
own_cmds() {
	awk '/\(plain\/own-schema\)/ { on = 1; next } on && /^```sh$/ { blk = 1; next } blk && /^```$/ { exit }
	     blk && /psql / { print }' "$root/docs/managed.md"
}
n=0
if out=$(q postgres postgres -c "CREATE DATABASE shop_own OWNER owner_cr"); then
	while IFS= read -r cmd; do
		n=$((n + 1))
		out=$(cd "$root" && PGHOST=$DIR PGPORT=$PORT PGUSER=owner_cr bash -c "${cmd//-d shop /-d shop_own }" 2>&1) ||
			{ notok "plain/own-schema (docs/managed.md's line $n, as owner_cr: $cmd)" "$out"; n=-1; break; }
	done < <(own_cmds)
	if [ "$n" -ge 3 ] && out=$(q owner_cr shop_own -c "CREATE ROLE svc_own LOGIN IN ROLE idempotency_app" \
		-c "GRANT CONNECT ON DATABASE shop_own TO svc_own" \
		-c 'ALTER ROLE svc_own IN DATABASE shop_own SET search_path = "$user", public, idempotency'); then
		check "plain/own-schema (docs/managed.md's $n lines: the service claims through its search_path)" "idempotency|new" svc_own shop_own \
			"SELECT c.relnamespace::regnamespace, (idem_claim('own-1', '{}')).outcome FROM pg_class c WHERE c.oid = 'idempotency_keys'::regclass"
		refused "plain/own-schema-outsider (no USAGE on schema idempotency: refused before any lock)" 42501 outsider shop_own \
			"CREATE RULE r AS ON INSERT TO idempotency.idempotency_keys DO INSTEAD NOTHING" "permission denied for schema idempotency"
	elif [ "$n" -ge 0 ]; then
		notok "plain/own-schema (docs/managed.md's block: $n psql lines, or the service role)" "$out"
	fi
else
	notok "plain/own-schema (CREATE DATABASE shop_own)" "$out"
fi

# --- the version, and the upgrade scripts ----------------------------------
# idem__version() answers the version each installation is (the plain
# script's has no pg_extension row); the plain script over an installation
# is refused (42710) before it changes anything.  Then the update machinery,
# which edition/updates/ leaves unrun until a second version: build.sh on a
# copy of the sources with one step $version--$version-next (a comment), its
# plain upgrade script refused where the schema has no edition (55000) or
# where idem__version() is another role's (42501), run
# over a plain installation (the version moved, the step done, claims
# answered), refused run again (55000); its pg_tle update path taken by
# ALTER EXTENSION UPDATE, which sets idem__version() too
check "plain/version (idem__version(), the plain script's installation)" "$version" owner_cr shop_cr "SELECT idem__version()"
[ -n "$tle_ready" ] && check "pgtle/version (idem__version(), the extension's)" "$version" app_owner payments "SELECT idem__version()"
refused "plain/installed-twice (the plain script over its installation: refused, naming it)" 42710 owner_cr shop_cr \
	"\\i $PLAIN" "schema public already has idempotency $version"
next=$version-next
upd=$DIR/updates-build
# (the sources by name: DIR may be under edition/, as test/lib/suites.sh's is)
UP=$upd/dist/idempotency-sql--$version--$next.sql
if ! out=$(rm -rf "$upd" && mkdir -p "$upd/edition/updates" &&
	cp -r "$root"/edition/{build.sh,dbdev-README.md,*.sql,fragments,functions} "$upd/edition/" 2>&1 &&
	cp "$root/idempotency.control" "$upd/" 2>&1 &&
	printf "COMMENT ON TABLE idempotency_settings IS 'updated to %s';\n" "$next" >"$upd/edition/updates/$version--$next.sql" &&
	bash "$upd/edition/build.sh" "$upd/dist" 2>&1) || [ ! -f "$UP" ]; then
	notok "updates/build (edition/build.sh with one step $version--$next)" "$out"
elif ! out=$(q postgres postgres -c "CREATE DATABASE shop_up OWNER owner_cr") || ! out=$(plain_install owner_cr shop_up); then
	notok "updates/plain-install (shop_up)" "$out"
else
	refused "plain/over-a-table (the plain script where the schema has a relation idempotency_keys: refused)" 42710 owner_cr shop_up \
		"CREATE SCHEMA other; CREATE TABLE other.idempotency_keys (k text); SET search_path = other; \\i $PLAIN" \
		"schema other already has a relation idempotency_keys"
	refused "updates/plain-no-edition (the upgrade script where the schema has none: refused)" 55000 owner_cr shop_up \
		"CREATE SCHEMA elsewhere; SET search_path = elsewhere; \\i $UP" \
		"this script upgrades idempotency $version, but schema elsewhere has no idempotency"
	# a body of the same text, written by another role that may create in
	# a schema (here the superuser): not the edition's, refused before the
	# step runs (reading the body alone, the check took it for $version)
	if out=$(q postgres shop_up -c "CREATE SCHEMA spoof; GRANT USAGE ON SCHEMA spoof TO owner_cr" \
		-c "CREATE FUNCTION spoof.idem__version() RETURNS text LANGUAGE sql AS \$v\$SELECT '$version'::pg_catalog.text\$v\$"); then
		refused "updates/plain-foreign-owner (the upgrade script where idem__version() is another role's: refused)" 42501 owner_cr shop_up \
			"SET search_path = spoof; \\i $UP" \
			"idem__version() in schema spoof is owned by role postgres, not by the role running this script (owner_cr)"
	else
		notok "updates/plain-foreign-owner (setup)" "$out"
	fi
	if out=$(q owner_cr shop_up -f "$UP"); then
		check "updates/plain (the plain upgrade script: version, the step, a claim)" "$next|updated to $next|new" owner_cr shop_up \
			"SELECT idem__version(), obj_description('idempotency_settings'::regclass, 'pg_class'), (idem_claim('up-1', '{}')).outcome"
	else
		notok "updates/plain (the plain upgrade script failed)" "$out"
	fi
	refused "updates/plain-twice (the upgrade script run again: refused, naming the version there)" 55000 owner_cr shop_up \
		"\\i $UP" "this script upgrades idempotency $version, but schema public has idempotency $next"
fi
if [ -f "$UP" ]; then
	if out=$(q rds_admin postgres -c "CREATE DATABASE payments_up OWNER app_owner") &&
		out=$(q postgres payments_up -c "CREATE EXTENSION pg_tle") &&
		out=$(q rds_admin payments_up -f "$upd/dist/idempotency-pgtle--$version.sql") &&
		out=$(q app_owner payments_up -c "CREATE EXTENSION idempotency" -c "ALTER EXTENSION idempotency UPDATE TO '$next'"); then
		check "updates/pgtle (pgtle.install_update_path, ALTER EXTENSION UPDATE: extversion, idem__version(), the step)" \
			"$next|$next|updated to $next" app_owner payments_up \
			"SELECT e.extversion, idem__version(), obj_description('idempotency_settings'::regclass, 'pg_class')
			 FROM pg_extension e WHERE e.extname = 'idempotency'"
	else
		notok "updates/pgtle (the update path from $version to $next)" "$out"
	fi
fi

# --- README's lines for a managed service ----------------------------------
# the psql commands of the first sh block under README's "## Install" (a
# line ending in \ continues on the next), run as written from the
# repository's root, their "-d shop" a database of their own: the pg_tle one
# by rds_admin (pg_tle made by the service: IF NOT EXISTS), the plain one by
# owner_cr (CREATEROLE; the roles exist by now)
readme_cmds() {
	awk '/^## Install/ { on = 1; next } on && /^## / { exit }
	     on && /^```sh$/ { blk = 1; next } blk && /^```$/ { exit }
	     blk { line = line $0; if (line ~ /\\$/) { sub(/\\$/, "", line); next } if (line ~ /^psql /) print line; line = "" }' "$root/README.md"
}
readme_run() {
	local n=0 cmd db role out
	while IFS= read -r cmd; do
		n=$((n + 1))
		case $cmd in
		*pgtle*) db=shop_readme_tle role=rds_admin ;;
		*) db=shop_readme_plain role=owner_cr ;;
		esac
		if ! out=$(q postgres postgres -c "CREATE DATABASE $db OWNER $role" && q postgres "$db" -c "CREATE EXTENSION pg_tle"); then
			notok "readme/$db (the service's part)" "$out"
			continue
		fi
		if out=$(cd "$root" && PGHOST=$DIR PGPORT=$PORT PGUSER=$role bash -c "${cmd//-d shop /-d $db }" 2>&1); then
			check "readme/$db (README's line, as $role: ${cmd:0:60}...)" "idempotency_keys" "$role" "$db" \
				"SELECT c.relname FROM pg_class c WHERE c.oid = 'idempotency_keys'::regclass"
		else
			notok "readme/$db (README's line, as $role: $cmd)" "$out"
		fi
	done < <(readme_cmds)
	[ "$n" = 2 ] || notok "readme (want 2 psql lines in README's first sh block under ## Install, found $n)"
}
if [ -n "$tle_ready" ]; then
	readme_run
else
	notok "readme (README's lines not run: no pg_tle installation here)"
fi

# --- database.dev (Supabase) -------------------------------------------------
# dbdev_add DIR NAME SCHEMA: the migration "dbdev add -o OUT -s SCHEMA ..."
# writes for the package in DIR (github.com/supabase/dbdev,
# cli/src/commands/add.rs, without a connection: the first version by
# pgtle.install_extension, each further one by
# pgtle.install_extension_version_sql, each update path, then DROP and
# CREATE EXTENSION and pgtle.set_default_version), the extension named NAME
# (HANDLE@idempotency for a package published under HANDLE)
dbdev_add() {
	# shellcheck disable=SC2016 # dollar quotes
	local dir=$1 name=$2 schema=$3 ctl comment dv f v first=1 sep='$sql_Test0dbdev0add0$' csep='$comment_Test0dbdev0add0$'
	ctl=$dir/idempotency.control
	comment=$(sed -nE "s/^comment = '(.*)'$/\1/p" "$ctl" | sed "s/''/'/g")
	dv=$(sed -nE "s/^default_version = '([^']+)'$/\1/p" "$ctl")
	for f in $(printf '%s\n' "$dir"/idempotency--*.sql | grep -v -- '--.*--' | sort -V); do
		v=$(basename "$f" .sql)
		v=${v#idempotency--}
		if [ -n "$first" ]; then
			printf "select pgtle.install_extension('%s', '%s', %s%s%s, %s" "$name" "$v" "$csep" "$comment" "$csep" "$sep"
			cat "$f"
			printf "%s, array[]::text[] );\n\n" "$sep"
			first=""
		else
			printf "select pgtle.install_extension_version_sql('%s', '%s', %s" "$name" "$v" "$sep"
			cat "$f"
			printf "%s);\n\n" "$sep"
		fi
	done
	for f in $(printf '%s\n' "$dir"/idempotency--*--*.sql | sort -V); do
		[ -e "$f" ] || continue
		v=$(basename "$f" .sql)
		v=${v#idempotency--}
		printf "select pgtle.install_update_path('%s', '%s', '%s', %s" "$name" "${v%%--*}" "${v#*--}" "$sep"
		cat "$f"
		printf "%s);\n\n" "$sep"
	done
	printf 'drop extension if exists "%s";\ncreate extension "%s" schema "%s" version '"'%s'"';\n' "$name" "$name" "$schema" "$dv"
	printf "select pgtle.set_default_version('%s', '%s');\n" "$name" "$dv"
}
# readme_sql N: the package README's Nth sql block
readme_sql() {
	awk -v n="$1" '/^```sql$/ { i++; if (i == n) { on = 1; next } } /^```$/ { on = 0 } on' "$root/edition/dist/dbdev/README.md"
}
# dbdev_service: what Supabase has made before the migration runs:
# supa_admin (its postgres role), databases supa and supa2 owned by it, pg_tle
# in each, schema extensions on the default search_path; the service's login
# roles
dbdev_service() {
	local db
	q postgres postgres -c "CREATE ROLE supa_admin LOGIN NOSUPERUSER CREATEROLE CREATEDB" \
		-c "CREATE ROLE checkout_service LOGIN" -c "CREATE ROLE checkout_ops LOGIN" &&
		q supa_admin postgres -c "CREATE DATABASE supa" -c "CREATE DATABASE supa2" || return 1
	for db in supa supa2; do
		q postgres "$db" -c "CREATE EXTENSION pg_tle" -c "GRANT pgtle_admin TO supa_admin" &&
			anon_defaults "$db" supa_admin &&
			q supa_admin "$db" -c "CREATE SCHEMA extensions" \
				-c "ALTER DATABASE $db SET search_path = \"\$user\", public, extensions" \
				-c "GRANT CONNECT ON DATABASE $db TO checkout_service, checkout_ops" || return 1
	done
}
DBDEV=$root/edition/dist/dbdev
DBDEV_NAME=acme@idempotency
dbdev_ready=""
if [ ! -f "$DBDEV/idempotency.control" ] || [ ! -f "$DBDEV/README.md" ]; then
	notok "dbdev (no $DBDEV/idempotency.control or README.md: make edition first)"
else
	dbdev_add "$DBDEV" "$DBDEV_NAME" extensions >"$DIR/dbdev-migration.sql"
	# the service: supa_admin (Supabase's postgres role), its database with
	# schema extensions on the default search_path, pg_tle in it
	if out=$(dbdev_service 2>&1); then
		if out=$(q supa_admin supa -f "$DIR/dbdev-migration.sql") &&
			out=$(q supa_admin supa2 -f "$DIR/dbdev-migration.sql"); then
			dbdev_ready=1
			anon_reaches supa supa_admin extensions
			check "dbdev/migration (dbdev add's migration of edition/dist/dbdev as supa_admin: extension \"$DBDEV_NAME\" $version in schema extensions, owned by supa_admin)" \
				"$version|supa_admin|extensions|supa_admin" supa_admin supa \
				"SELECT e.extversion, pg_get_userbyid(e.extowner), e.extnamespace::regnamespace, pg_get_userbyid(c.relowner)
				 FROM pg_extension e, pg_class c WHERE e.extname = '$DBDEV_NAME' AND c.oid = 'extensions.idempotency_keys'::regclass"
		else
			notok "dbdev/migration (dbdev add's migration of edition/dist/dbdev, as supa_admin)" "$out"
		fi
	else
		notok "dbdev (the service's part: supa_admin, the databases, pg_tle, schema extensions)" "$out"
	fi
fi
if [ -n "$dbdev_ready" ]; then
	# the README's grants as supa_admin, which on Supabase made the roles
	# (here owner_cr did: from PostgreSQL 16 on, CREATEROLE alone does not
	# let another role grant them); its example as checkout_service
	docs=$(awk '/\(dbdev\/\*\) -->$/ { on = 1; next } on && /^```sql$/ { next } on && /^```$/ { exit } on' "$root/docs/managed.md")
	if [ -n "$docs" ] && [ "$docs" = "$(readme_sql 1)" ]; then
		ok "dbdev/docs (docs/managed.md's grants, after its dbdev/* excerpt line, are the package README's)"
	else
		notok "dbdev/docs (docs/managed.md's grants, after its dbdev/* excerpt line, are the package README's)" "docs:
$docs
README:
$(readme_sql 1)"
	fi
	if out=$(q owner_cr postgres -c "GRANT idempotency_app, idempotency_admin TO supa_admin WITH ADMIN OPTION") &&
		out=$(readme_sql 1 | q supa_admin supa -f -) && out=$(readme_sql 1 | q supa_admin supa2 -f -); then
		out=$(readme_sql 2 | q checkout_service supa -f -)
		check "dbdev/readme (the package README's example: new, then replay)" "replay|201|{\"charge\": \"ch_1\"}" \
			checkout_service supa "SELECT outcome, response_code, response FROM idem_claim('order-7f3a', '{\"amount\": 3000, \"currency\": \"EUR\"}', 'merchant-42')"
		[ "$(printf '%s\n' "$out" | tail -n 1)" = "replay|201|{\"charge\": \"ch_1\"}" ] ||
			notok "dbdev/readme-output (the example's last line)" "$out"
	else
		notok "dbdev/readme (the package README's grants, as supa_admin)" "$out"
	fi
	# a role without USAGE on the schema cannot name the table: a statement
	# PostgreSQL locks the table for before checking ownership (CREATE
	# RULE) is refused without queueing that lock (docs/managed.md, lock guard)
	refused "dbdev/outsider-queues-no-lock (no USAGE on schema extensions)" 42501 outsider supa \
		"CREATE RULE r AS ON INSERT TO extensions.idempotency_keys DO INSTEAD NOTHING" "permission denied for schema extensions"
	# a logical backup restored as docs/managed.md says, into the second
	# database, where the migration ran: the extension's entry (quoted
	# in the dump: its name holds @), pg_tle's and its functions left out
	if out=$(q checkout_service supa -c "SELECT outcome FROM idem_claim('order-open', NULL, 'merchant-42')") &&
		out=$(pg_dump -h "$DIR" -p "$PORT" -U supa_admin -Fc -f "$DIR/supa.dump" -d supa 2>&1) &&
		out=$(pg_restore -l "$DIR/supa.dump" | bash "$root/edition/restore-list.sh" >"$DIR/supa.list") &&
		out=$(pg_restore --exit-on-error -h "$DIR" -p "$PORT" -U supa_admin -d supa2 -L "$DIR/supa.list" "$DIR/supa.dump" 2>&1); then
		rows="SELECT string_agg(concat_ws(' ', scope, key, status, token, response_code, response::text, request_hash::text), ';' ORDER BY scope, key) || '|' || (SELECT last_value FROM extensions.idempotency_token_seq) FROM extensions.idempotency_keys"
		src=$(q supa_admin supa -c "$rows")
		case $src in *"merchant-42 order-7f3a completed"*"merchant-42 order-open processing"*) ;; *) notok "dbdev/restore-source (the two keys in supa)" "$src" ;; esac
		check "dbdev/restore (pg_dump, restore-list.sh, pg_restore -L into a database with \"$DBDEV_NAME\": the same rows and token sequence)" \
			"$src" supa_admin supa2 "$rows"
		check "dbdev/restore-replay (the restored key replays, the open one is in progress)" "replay|201|in_progress" \
			checkout_service supa2 "SELECT (SELECT concat_ws('|', outcome, response_code) FROM idem_claim('order-7f3a', '{\"amount\": 3000, \"currency\": \"EUR\"}', 'merchant-42')) || '|' || (SELECT outcome FROM idem_claim('order-open', NULL, 'merchant-42', wait => false))"
	else
		notok "dbdev/restore (pg_dump, restore-list.sh, pg_restore -L as supa_admin)" "$out
$(grep -i -E 'EXTENSION|idempotency' "$DIR/supa.list" 2>/dev/null | head -n 20)"
	fi
	# the same migration run again (docs/managed.md: it fails before its
	# drop extension, for a runner that stops at an error): the keys stay
	out=$(q supa_admin supa -f "$DIR/dbdev-migration.sql" 2>&1)
	case $out in
	*"extension \"$DBDEV_NAME\" already installed"*)
		check "dbdev/migration-again (fails at pgtle.install_extension, already installed; the keys stay)" 2 \
			supa_admin supa "SELECT count(*) FROM extensions.idempotency_keys" ;;
	*) notok "dbdev/migration-again (want: extension \"$DBDEV_NAME\" already installed)" "$out" ;;
	esac
fi

# --- each installation: the application's view ----------------------------
# role names are cluster-wide: one pair per database
flow() {
	local db=$1 owner=$2 app=${1}_app ops=${1}_ops tok out
	# the login roles, made by the role that made idempotency_app and
	# idempotency_admin (owner_cr; from PostgreSQL 16 on, CREATEROLE alone
	# does not let a role grant roles another made); CONNECT from the owner
	if ! out=$(q owner_cr postgres -c "CREATE ROLE $app LOGIN IN ROLE idempotency_app" \
		-c "CREATE ROLE $ops LOGIN IN ROLE idempotency_admin" &&
		q "$owner" "$db" -c "GRANT CONNECT ON DATABASE $db TO $app, $ops, outsider"); then
		notok "$db/roles" "$out"
		return
	fi
	tok=$(q "$app" "$db" -c "SELECT outcome || ' ' || token FROM idem_claim('k1', '{\"amount\": 3000}', 'm1')")
	case $tok in
	"new "[0-9]*) ok "$db/claim-new (as $app, granted idempotency_app)" ;;
	*) notok "$db/claim-new" "$tok"; return ;;
	esac
	check "$db/complete" "" "$app" "$db" "SELECT idem_complete('k1', 201, '{\"id\": 7}', 'm1', ${tok#new })"
	check "$db/replay" "replay|201|{\"id\": 7}" "$app" "$db" \
		"SELECT outcome, response_code, response FROM idem_claim('k1', '{\"amount\": 3000}', 'm1')"
	check "$db/in-progress" "new|in_progress" "$app" "$db" \
		"SELECT (SELECT outcome FROM idem_claim('k2', NULL, 'm1')) || '|' || (SELECT outcome FROM idem_claim('k2', NULL, 'm1', wait => false))"
	refused "$db/app-cannot-expire" 42501 "$app" "$db" "SELECT idem_expire()"
	refused "$db/app-cannot-resolve" 42501 "$app" "$db" "SELECT idem_resolve('k2', 'm1', 'release')"
	check "$db/admin-resolves-and-expires" "t|t" "$ops" "$db" \
		"SELECT idem_resolve('k2', 'm1', 'release') IS NOT NULL, idem_expire() >= 0"
	refused "$db/public-cannot-claim" 42501 outsider "$db" "SELECT * FROM idem_claim('k3')"
	refused "$db/public-cannot-read" 42501 outsider "$db" "SELECT count(*) FROM idempotency_keys"
	refused "$db/public-cannot-execute" 42501 outsider "$db" "SELECT * FROM idem_execute('k3', NULL, '', 200, 'SELECT 1')"
	# PUBLIC reaches nothing: no privilege on a table, view or sequence of
	# the installation, no SECURITY DEFINER function it may call, and none
	# of the functions the C build keeps from PUBLIC (privileges.sql's
	# REVOKE ... FROM PUBLIC), whatever the overload.  What it may call
	# besides idem_request_hash (functions that run as the caller, such as
	# idem_request_hash's helpers) is named in the line.
	out=$(q "$owner" "$db" -v kept="$KEPT" <<'SQL'
SELECT (SELECT count(*) FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace
          AND (has_table_privilege('outsider', c.oid, 'SELECT,INSERT,UPDATE,DELETE,TRUNCATE,REFERENCES,TRIGGER')
               OR c.relkind = 'S' AND has_sequence_privilege('outsider', c.oid, 'USAGE,SELECT,UPDATE'))),
       (SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.prosecdef
          AND has_function_privilege('outsider', p.oid, 'EXECUTE')),
       (SELECT coalesce(string_agg(p.oid::regprocedure::text, ' ' ORDER BY 1), '') FROM pg_proc p
         WHERE p.pronamespace = 'public'::regnamespace AND p.proname = ANY (string_to_array(:'kept', ' '))
           AND has_function_privilege('outsider', p.oid, 'EXECUTE')),
       (SELECT coalesce(string_agg(p.oid::regprocedure::text, ' ' ORDER BY 1), '') FROM pg_proc p
         WHERE p.pronamespace = 'public'::regnamespace AND p.proname <> 'idem_request_hash'
           AND p.proname <> ALL (string_to_array(:'kept', ' '))
           AND has_function_privilege('outsider', p.oid, 'EXECUTE'));
SQL
	)
	case $out in
	"0|0||") ok "$db/public-reaches-nothing (PUBLIC may call idem_request_hash and nothing else)" ;;
	"0|0||"*) ok "$db/public-reaches-nothing (besides idem_request_hash, PUBLIC may call: ${out#0|0||})" ;;
	*) notok "$db/public-reaches-nothing" "relations PUBLIC may use|SECURITY DEFINER functions PUBLIC may call|functions kept from PUBLIC in the C build that PUBLIC may call|others
$out" ;;
	esac
	anon_reaches "$db" "$owner" public
}

# --- pg_cron: scheduled now, checked at the end (its first run can be a
# minute away) --------------------------------------------------------------
CRON_READY=""
CRON_DOC_READY=""
cron_schedule() {
	local out
	# the service: pg_cron in cron.database_name, its schema for the
	# operator role; the owner stores rows already past their expires_at
	# and one live row; the operator schedules expiry
	if ! out=$(q postgres payments -c "CREATE EXTENSION pg_cron" -c "GRANT USAGE ON SCHEMA cron TO payments_ops"); then
		notok "cron/expire (CREATE EXTENSION pg_cron)" "$out"
		return
	fi
	CRONV=$(q postgres payments -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'")
	SCHEDULE='* * * * *'
	[ "$(printf '%s\n1.5\n' "$CRONV" | sort -V | head -n 1)" = 1.5 ] && SCHEDULE='1 seconds'
	if out=$(q app_owner payments <<'SQL'
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response_code)
SELECT 'cron', 'old-' || i, 'completed', nextval('idempotency_token_seq'), now() - interval '2 days',
       now() - interval '2 days', now() - interval '1 day', 200
FROM generate_series(1, 3) i;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response_code)
VALUES ('cron', 'live', 'completed', nextval('idempotency_token_seq'), now(), now(), now() + interval '1 day', 200);
SQL
	) && out=$(q payments_ops payments -c "SELECT cron.schedule('expire-payments', '$SCHEDULE', 'SELECT idem_expire(100000)') > 0"); then
		CRON_READY=1
	else
		notok "cron/expire (the rows, or cron.schedule as payments_ops)" "$out"
	fi
	# docs/managed.md's own statement, as written (its "shop" the plain
	# script's shop_cr), by payments_ops where pg_cron lives, after the
	# grant the text after it names; rows past expires_at in shop_cr
	local doc
	doc=$(awk '/excerpt: needs pg_cron; test\/edition\/install.sh runs it/ { on = 1; next }
	           on && /^```sql$/ { blk = 1; next } blk && /^```$/ { exit } blk { print }' "$root/docs/managed.md")
	if [ -n "$doc" ] &&
		out=$(q postgres payments -c "GRANT EXECUTE ON FUNCTION cron.schedule_in_database(text, text, text, text, text, boolean) TO payments_ops") &&
		out=$(q owner_cr shop_cr -c "GRANT CONNECT ON DATABASE shop_cr TO payments_ops" -c "
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response_code)
SELECT 'cron', 'old-' || i, 'completed', nextval('idempotency_token_seq'), now() - interval '2 days',
       now() - interval '2 days', now() - interval '1 day', 200
FROM generate_series(1, 3) i") &&
		out=$(q payments_ops payments -c "${doc//\'shop\'/\'shop_cr\'}"); then
		CRON_DOC_READY=1
	else
		notok "cron/docs-schedule-in-database (docs/managed.md's cron.schedule_in_database, as payments_ops)" "${out:-no statement found after the marker}"
	fi
}
cron_check() {
	local left="" left_doc="" runs
	for _ in $(seq 300); do
		left=$(q postgres payments -c "SELECT count(*) FROM idempotency_keys WHERE scope = 'cron' AND key LIKE 'old-%'")
		[ -n "$CRON_DOC_READY" ] &&
			left_doc=$(q postgres shop_cr -c "SELECT count(*) FROM idempotency_keys WHERE scope = 'cron' AND key LIKE 'old-%'")
		[ "$left" = 0 ] && [ "${left_doc:-0}" = 0 ] && break
		sleep 0.5
	done
	if [ -n "$CRON_DOC_READY" ]; then
		if [ "$left_doc" = 0 ]; then
			ok "cron/docs-schedule-in-database (docs/managed.md's statement as written, as payments_ops, run in shop_cr: the rows past expires_at went)"
		else
			notok "cron/docs-schedule-in-database ($left_doc rows past expires_at left in shop_cr after 150 s)" \
				"$(q postgres payments -c "SELECT string_agg(DISTINCT status || ' ' || coalesce(return_message, ''), '; ') FROM cron.job_run_details d JOIN cron.job j USING (jobid) WHERE j.database = 'shop_cr'")"
		fi
		q payments_ops payments -c "SELECT cron.unschedule('idempotency-expire')" >/dev/null
	fi
	runs=$(q postgres payments -c "SELECT string_agg(DISTINCT status || ' ' || coalesce(return_message, ''), '; ') FROM cron.job_run_details")
	if [ "$left" = 0 ]; then
		check "cron/expire (pg_cron $CRONV, '$SCHEDULE', as payments_ops: the rows past expires_at went, the live one stayed)" \
			1 postgres payments "SELECT count(*) FROM idempotency_keys WHERE scope = 'cron'"
	else
		notok "cron/expire (pg_cron $CRONV, '$SCHEDULE': $left rows past expires_at left after 150 s)" "runs: $runs
$(grep -i cron "$DIR/server.log" | tail -n 10)"
	fi
	q payments_ops payments -c "SELECT cron.unschedule('expire-payments')" >/dev/null
}

flow shop_cr owner_cr
flow shop_plain owner_plain
if [ -n "$tle_ready" ]; then
	flow payments app_owner
	if [ -n "$CRON" ]; then cron_schedule; fi
	# docs/tenants.md's recipe, as the table's owner: one tenant per role
	if out=$(q app_owner payments <<'SQL'
ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE idempotency_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON idempotency_keys TO idempotency_app
    USING (scope = current_user) WITH CHECK (scope = current_user);
CREATE POLICY admin_all ON idempotency_keys TO idempotency_admin
    USING (true) WITH CHECK (true);
SELECT idem_save_row_security();
SQL
	) && [ "$out" = 2 ] && out=$(q owner_cr postgres -c 'CREATE ROLE "merchant-42" LOGIN IN ROLE idempotency_app') &&
		out=$(q app_owner payments -c 'GRANT CONNECT ON DATABASE payments TO "merchant-42"'); then
		check "payments/tenant-own-scope" "new" merchant-42 payments \
			"SELECT outcome FROM idem_claim('t1', NULL, 'merchant-42')"
		refused "payments/tenant-other-scope" 42501 merchant-42 payments \
			"SELECT outcome FROM idem_claim('t1', NULL, 'merchant-43')" \
			'new row violates row-level security policy for table "idempotency_keys"'
		check "payments/tenant-sees-own-rows" "merchant-42" merchant-42 payments \
			"SELECT string_agg(DISTINCT scope, ',') FROM idempotency_keys"
		# docs/tenants.md, "Owner, FORCE": the view runs as the owner, whom
		# FORCE subjects to the policies: it needs one of its own
		stats_all="SELECT (SELECT processing_keys FROM idempotency_stats) = count(*) FROM idempotency_keys WHERE status = 'processing'"
		check "payments/stats-without-owner-policy" "f" payments_ops payments "$stats_all"
		if out=$(q app_owner payments -c 'CREATE POLICY owner_all ON idempotency_keys TO CURRENT_USER USING (true) WITH CHECK (true)' \
			-c 'SELECT idem_save_row_security()' 2>&1) && [ "$out" = 3 ]; then
			check "payments/stats-count-every-scope" "t" payments_ops payments "$stats_all"
		else
			notok "payments/stats-count-every-scope (the owner's policy owner_all, as the owner)" "$out"
		fi
	else
		notok "payments/tenant-recipe (the owner's policies and idem_save_row_security)" "$out"
	fi
fi

if [ -z "$CRON" ]; then
	skip "cron/expire (pg_cron is not installed for PostgreSQL $(pg_config --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/'))"
elif [ -z "$tle_ready" ]; then
	notok "cron/expire (no installation in database payments to expire)"
elif [ -n "$CRON_READY" ]; then
	cron_check
fi

grep -E 'PANIC|server process .* was terminated' "$DIR/server.log" && notok "server (a backend crashed: server.log above)"
exit "$failed"
