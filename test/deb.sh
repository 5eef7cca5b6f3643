#!/usr/bin/env bash
# test/deb.sh: build the Debian package postgresql-$PG_MAJOR-idempotency
# with dpkg-buildpackage (debian/, pg_buildext), install it with dpkg, and use
# the installed extension on a throwaway server.  debian/control lists a
# package for every version of debian/pgversions; the build makes the one
# for PG_MAJOR (PG_SUPPORTED_VERSIONS), its control file regenerated from
# debian/control.in for that version (PG_UPDATECONTROL), as Debian's own
# builds for a distribution with another set of versions do.  Run by test/run.sh (as root,
# packages installed, extension built); exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib/common.sh

BUILD=$(mktemp -d "${IDEM_TMP:-/tmp}/idempotency-deb.XXXXXX")
trap 'stop_server "${WORK:-/nonexistent}/data"; rm -rf "$BUILD" "${WORK:-}"' EXIT
mkdir "$BUILD/src"
tar --exclude=./.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' --exclude='tmp_check*' \
	--exclude=results --exclude=output_iso --exclude=node_modules -cf - . | tar -C "$BUILD/src" -xf -
(cd "$BUILD/src" && PG_SUPPORTED_VERSIONS=$PG_MAJOR PG_UPDATECONTROL=yes dpkg-buildpackage -us -uc -b) \
	>"$BUILD/build.log" 2>&1 ||
	{ tail -n 40 "$BUILD/build.log"; exit 1; }
deb=$(ls "$BUILD"/postgresql-"$PG_MAJOR"-idempotency_*.deb | head -n 1)
echo "built $(basename "$deb")"
dpkg -i "$deb" >/dev/null
dpkg -S "/usr/lib/postgresql/$PG_MAJOR/lib/idempotency.so" | grep -q "postgresql-$PG_MAJOR-idempotency"
echo "installed: $(dpkg-query -W -f='${Package} ${Version} ${Status}' "postgresql-$PG_MAJOR-idempotency")"

make_workdir
PORT=$(free_port 59432)
start_server "$WORK/data" "$PORT"
out=$(as_postgres psql -X -q -At -h "$WORK" -p "$PORT" -d postgres -v ON_ERROR_STOP=1 \
	-c "CREATE EXTENSION idempotency" \
	-c "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'" \
	-c "BEGIN" -c "SELECT outcome FROM idem_claim('deb', '{\"a\": 1}')" \
	-c "SELECT idem_complete('deb', 201, '{\"ok\": true}')" -c "COMMIT" \
	-c "SELECT outcome || ' ' || response FROM idem_claim('deb', '{\"a\": 1}')")
echo "$out"
version=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" idempotency.control)
[ "$out" = "$(printf '%s\nnew\n\nreplay {"ok": true}' "$version")" ]
# the preloaded library's worker launcher starts soon after the server
# accepts connections (later on a loaded machine): wait for it
for _ in $(seq 100); do
	launchers=$(as_postgres psql -X -q -At -h "$WORK" -p "$PORT" -d postgres -c \
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'")
	[ "$launchers" = 1 ] && break
	sleep 0.1
done
echo "idempotency launcher processes: $launchers"
[ "$launchers" = 1 ]
