#!/usr/bin/env bash
# test/edition/prepare.sh PG_BIN DIR: as root, a private copy of the
# PostgreSQL installation at PG_BIN under DIR, without the C build's files,
# with pg_tle built into it (../shared/pg_tle/build.sh); prints the copy's
# bin directory.  The SQL edition's tests (test/edition/install.sh,
# test/edition/regress.sh) run their servers from it, as the postgres OS
# user, because:
#   - pg_tle refuses to install an extension named idempotency when a
#     control file of that name is in the server's sharedir, as it is
#     wherever the C build is installed;
#   - a server without the C build's files cannot run it by mistake: a test
#     that said CREATE EXTENSION idempotency would fail, not pass on C.
# PostgreSQL's binaries find their lib and share directories relative to
# bin, so the copy keeps Debian's layout: DIR/usr/lib/postgresql/N and
# DIR/usr/share/postgresql/N.  Whatever else is installed into PG_BIN's
# PostgreSQL (pg_cron, from postgresql-N-cron) comes along.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pg_bin=${1:?usage: test/edition/prepare.sh PG_BIN DIR}
dir=${2:?usage: test/edition/prepare.sh PG_BIN DIR}
[ "$(id -u)" = 0 ] || { echo "test/edition/prepare.sh: needs root (pg_tle's build installs packages)" >&2; exit 2; }
libdir=$(cd "$pg_bin/.." && pwd)          # /usr/lib/postgresql/N
share=$("$pg_bin/pg_config" --sharedir)   # /usr/share/postgresql/N
mkdir -p "$dir$(dirname "$libdir")" "$dir$(dirname "$share")"
rm -rf "${dir:?}$libdir" "${dir:?}$share"
cp -a "$libdir" "$dir$libdir"
cp -a "$share" "$dir$share"
copy_bin=$dir$libdir/bin
# the server headers, for pg_tle's build: where the copy's pg_config looks
inc=$("$pg_bin/pg_config" --pkgincludedir)
mkdir -p "$dir$(dirname "$inc")"
ln -sfn "$inc" "$dir$inc"
pkglib=$("$copy_bin/pg_config" --pkglibdir)
sharedir=$("$copy_bin/pg_config" --sharedir)
case $pkglib:$sharedir in
"$dir"/*:"$dir"/*) ;;
*) echo "test/edition/prepare.sh: the copy's pg_config points outside it ($pkglib, $sharedir)" >&2; exit 1 ;;
esac
rm -f "$pkglib"/idempotency.so "$pkglib"/bitcode/idempotency.index.bc "$sharedir"/extension/idempotency.control \
	"$sharedir"/extension/idempotency--*.sql
rm -rf "$pkglib"/bitcode/idempotency
if compgen -G "$pkglib/idempotency*" >/dev/null || compgen -G "$sharedir/extension/idempotency*" >/dev/null; then
	echo "test/edition/prepare.sh: the C build's files are still in the copy" >&2
	exit 1
fi
build=${PGTLE_BUILD:-$here/../../../shared/pg_tle/build.sh}
[ -f "$build" ] || { echo "test/edition/prepare.sh: no $build (../shared/pg_tle/build.sh beside the repository)" >&2; exit 1; }
PG_CONFIG=$copy_bin/pg_config bash "$build" >&2
[ -f "$pkglib/pg_tle.so" ] || { echo "test/edition/prepare.sh: pg_tle did not install into the copy" >&2; exit 1; }
chown -R postgres:postgres "$dir"
echo "$copy_bin"
