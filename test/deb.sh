#!/usr/bin/env bash
# test/deb.sh: build the Debian package postgresql-$PG_MAJOR-idempotency
# with dpkg-buildpackage (debian/, pg_buildext), install it with dpkg, and use
# the installed extension on a throwaway server.  debian/control lists a
# package for every version of debian/pgversions; the build makes the one
# for PG_MAJOR (PG_SUPPORTED_VERSIONS), its control file regenerated from
# debian/control.in for that version (PG_UPDATECONTROL), as Debian's own
# builds for a distribution with another set of versions do; and the source
# package.  With IDEM_AUTOPKGTEST=1, then runs the package's autopkgtest
# (debian/tests/: make installcheck through pg_buildext, with and without
# the preload) against the installed package.  Run by test/run.sh (as root,
# packages installed, extension built); exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib/common.sh

BUILD=$(mktemp -d "${IDEM_TMP:-/tmp}/idempotency-deb.XXXXXX")
trap 'stop_server "${WORK:-/nonexistent}/data"; rm -rf "$BUILD" "${WORK:-}"' EXIT
mkdir "$BUILD/src"
tar --exclude=./.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' --exclude='tmp_check*' \
	--exclude=results --exclude=output_iso --exclude=node_modules -cf - . | tar -C "$BUILD/src" -xf -
# the source package too (format 3.0 (quilt)): the upstream tarball is the
# tree without debian/, as the release's would be
upstream=$(dpkg-parsechangelog -l debian/changelog -S Version | sed 's/-[^-]*$//')
tar -C "$BUILD" --exclude=src/debian -czf "$BUILD/idempotency_$upstream.orig.tar.gz" src
(cd "$BUILD/src" && PG_SUPPORTED_VERSIONS=$PG_MAJOR PG_UPDATECONTROL=yes dpkg-buildpackage -us -uc) \
	>"$BUILD/build.log" 2>&1 ||
	{ tail -n 40 "$BUILD/build.log"; exit 1; }
deb=$(ls "$BUILD"/postgresql-"$PG_MAJOR"-idempotency_*.deb | head -n 1)
dsc=$(ls "$BUILD"/idempotency_*.dsc | head -n 1)
grep -q '^Format: 3.0 (quilt)$' "$dsc"
echo "built $(basename "$deb") and $(basename "$dsc") (3.0 (quilt))"
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

# debian/watch, against a copy of PGXN's API on loopback (the machines here
# reach no PGXN): a release newer than debian/changelog's is found, with the
# URL of its archive
if command -v uscan >/dev/null; then
	pgxn=$BUILD/pgxn
	newer=$upstream.1
	mkdir -p "$pgxn/dist" "$BUILD/watch/debian"
	printf '{"name":"idempotency","releases":{"stable":[{"version":"%s"},{"version":"%s"}]}}\n' \
		"$newer" "$upstream" >"$pgxn/dist/idempotency.json"
	wport=$(free_port 58765)
	python3 -m http.server "$wport" --bind 127.0.0.1 --directory "$pgxn" >"$BUILD/pgxn.log" 2>&1 &
	wpid=$!
	for _ in $(seq 100); do
		python3 -c "import socket; socket.create_connection(('127.0.0.1', $wport), 1)" 2>/dev/null && break
		sleep 0.1
	done
	cp debian/changelog debian/control "$BUILD/watch/debian/"
	sed "s%https://api.pgxn.org/%http://127.0.0.1:$wport/%g" debian/watch >"$BUILD/watch/debian/watch"
	(cd "$BUILD/watch" && uscan --dehs) >"$BUILD/uscan.log" 2>&1 || true
	kill "$wpid" 2>/dev/null
	if ! grep -q "<upstream-version>$newer</upstream-version>" "$BUILD/uscan.log" ||
		! grep -q "<upstream-url>http://127.0.0.1:$wport/dist/idempotency/$newer/idempotency-$newer.zip</upstream-url>" \
			"$BUILD/uscan.log"; then
		echo "debian/watch: uscan did not find $newer and its archive on PGXN's layout:"
		cat "$BUILD/uscan.log"
		exit 1
	fi
	echo "debian/watch: uscan found $newer on PGXN's layout, at .../dist/idempotency/$newer/idempotency-$newer.zip"
fi

# the autopkgtest, as the PostgreSQL apt repository runs it: the source
# tree, the package installed, on this machine (the null runner)
if [ "${IDEM_AUTOPKGTEST:-0}" = 1 ]; then
	t0=$SECONDS
	if ! autopkgtest --no-built-binaries "$BUILD/src" "$deb" -- null >"$BUILD/autopkgtest.log" 2>&1; then
		tail -n 60 "$BUILD/autopkgtest.log"
		exit 1
	fi
	grep -E '^installcheck +PASS' "$BUILD/autopkgtest.log"
	echo "autopkgtest passed in $((SECONDS - t0)) s"
fi
