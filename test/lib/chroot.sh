# shellcheck shell=bash
# test/lib/chroot.sh: the Debian chroots in which test/run.sh tests the
# PostgreSQL versions that bookworm does not ship.  Sourced by test/run.sh
# (from the repository root, as root).
#
#   version  Debian suite                   packages from
#   15       bookworm (Debian 12)           bookworm (on this machine itself
#                                           when it is bookworm, as in CI)
#   17       trixie (Debian 13)             trixie
#   18       forky (Debian testing)         forky
#   19       forky + experimental           postgresql-19* and libpq from
#                                           experimental (as NAME/experimental,
#                                           their dependencies from forky)
#
# Each suite's base system is made once per machine with
# debootstrap --variant=minbase from the mirror the machine's apt sources
# name, and cached as /var/cache/idempotency-chroot-SUITE.tar; every run
# unpacks it anew under /var/tmp (test/run.sh), with the machine's apt
# settings and a package cache per suite (/var/cache/idempotency-apt-*)
# mounted in; test/run.sh then copies the tree in (and ../shared beside it,
# for the citus suite's build.sh) and runs itself there with PG_MAJOR set,
# which installs that version's packages, in a private mount namespace that
# has proc, sys, dev, a tmpfs /dev/shm and /run.  Nothing it mounts
# outlives the run.

# The Debian suite a PostgreSQL major version is tested on (empty: none).
chroot_suite()
{
	case $1 in
	15) echo bookworm ;;
	17) echo trixie ;;
	18 | 19) echo forky ;;
	*) return 1 ;;
	esac
}

# The mirror the machine's apt sources name (deb822 or one-line format).
chroot_mirror()
{
	local m=""
	m=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null)
	[ -n "$m" ] || m=$(awk '$1 == "deb" && $2 ~ /debian\/?$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
	echo "${m:-http://deb.debian.org/debian}"
}

# The cached base system of Debian suite $1, made when missing: prints its
# path.  debootstrap knows forky through its sid script.  A failed attempt
# leaves no cache behind.
chroot_base()
{
	local suite=$1 cache=/var/cache/idempotency-chroot-$1.tar base script=""
	if [ -s "$cache" ]; then
		echo "$cache"
		return 0
	fi
	if ! command -v debootstrap >/dev/null; then
		apt-get update -qq >/dev/null 2>&1
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 || {
			echo "could not install debootstrap" >&2
			return 1
		}
	fi
	[ -e "/usr/share/debootstrap/scripts/$suite" ] || script=/usr/share/debootstrap/scripts/sid
	base=$(mktemp -d /var/tmp/idempotency-debootstrap.XXXXXX)
	# shellcheck disable=SC2086 # $script: empty or one path
	if ! debootstrap --variant=minbase "$suite" "$base" "$(chroot_mirror)" $script >"$base.log" 2>&1; then
		tail -n 20 "$base.log" >&2
		echo "debootstrap $suite failed" >&2
		rm -rf --one-file-system "$base" "$base.log"
		return 1
	fi
	tar -C "$base" -cf "$cache.tmp.$$" . && mv "$cache.tmp.$$" "$cache"
	rm -rf --one-file-system "$base" "$base.log"
	[ -s "$cache" ] && echo "$cache"
}

# The Debian codename of this system (bookworm, trixie, forky, ...).
host_codename()
{
	# shellcheck disable=SC1091
	(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
}

# True when a download from the mirror failed, by the log $1 of debootstrap
# or apt-get: the packages could not be fetched (counted as skipped).
fetch_failed()
{
	grep -qiE "Failed getting release|Couldn't download|Failed to fetch|Unable to fetch|Temporary failure resolving|Could not resolve|Could not connect|Connection failed|Unable to locate package|has no installation candidate|Release file .* is not valid yet|Hash Sum mismatch" "$1"
}

# Unpack suite $2's base system into a new directory $1 and make it usable:
# the host's resolver and apt settings, apt sources for that suite (with
# experimental, pinned low as Debian does, for 19) on the same mirror, and a
# policy-rc.d that keeps
# package scripts from starting services (Debian's default cluster).
chroot_make()
{
	local root=$1 suite=$2 major=$3 cache mirror
	cache=$(chroot_base "$suite") || return 1
	tar -C "$root" -xf "$cache" || return 1
	chmod 755 "$root"	# mktemp's 0700: the postgres user must reach /
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	mirror=$(chroot_mirror)
	rm -f "$root/etc/apt/sources.list"
	# 19: deb-src too, for pgtap's source (test/run.sh,
	# pgtap_from_source), while Debian ships no postgresql-19-pgtap
	cat >"$root/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb$([ "$major" = 19 ] && echo " deb-src")
URIs: $mirror
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	if [ "$major" = 19 ]; then
		cat >>"$root/etc/apt/sources.list.d/debian.sources" <<SRC

Types: deb
URIs: $mirror
Suites: experimental
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	fi
	# the host's apt settings (a snapshot mirror's expired Release files
	# accepted, say), less any that deletes downloaded packages: the chroot's
	# are kept in a cache of their own
	cp -a /etc/apt/apt.conf.d/. "$root/etc/apt/apt.conf.d/" 2>/dev/null
	rm -f "$root/etc/apt/apt.conf.d/docker-clean"
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"
	# dpkg without an fsync per file (the chroot is thrown away after its
	# run), and without man pages: nothing reads them here
	echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/idempotency-unsafe-io"
	echo 'path-exclude=/usr/share/man/*' >"$root/etc/dpkg/dpkg.cfg.d/idempotency-no-man"
	# downloaded packages kept between runs, one cache per suite
	mkdir -p "$(chroot_apt_cache "$major")/partial"
}

# Run command $2 (a string for bash -c, in /work/project) in the chroot $1,
# in a private mount namespace with proc, sys, dev, devpts, /dev/shm, /run
# and the suite's package cache ($3) mounted.  Inside another chroot (the
# fresh machine of ../shared/fresh/run.sh) / is no mount point and
# "unshare --propagation private" fails: the namespace then keeps the
# propagation it has (unchanged), which is private already there.
chroot_exec()
{
	local root=$1 cmd=$2 apt=$3 prop=private
	unshare --mount --propagation private true 2>/dev/null || prop=unchanged
	unshare --mount --propagation "$prop" --fork bash -c '
		r=$1 c=$2 a=$3
		mount -t proc proc "$r/proc" && mount -t sysfs sys "$r/sys" &&
			mount --bind /dev "$r/dev" &&
			{ mount -t devpts -o newinstance,ptmxmode=0666 devpts "$r/dev/pts" 2>/dev/null || true; } &&
			mount -t tmpfs -o size=2g tmpfs "$r/dev/shm" && mount -t tmpfs tmpfs "$r/run" &&
			mount --bind "$a" "$r/var/cache/apt/archives" || exit 3
		exec chroot "$r" /usr/bin/env -i HOME=/root \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			LANG=C.UTF-8 TERM=dumb ${CI:+CI=$CI} /bin/bash -c "cd /work/project && $c" </dev/null
	' chroot "$root" "$cmd" "$apt"
}

# Copy this system's PostgreSQL $2 (with the idempotency it has installed)
# into chroot $1 at /opt/idempotency-old, for test/t/060_major_upgrade.pl:
# the Debian layout (usr/lib/postgresql/N, usr/share/postgresql/N; the
# binaries find their share directory relative to themselves), and under
# lib-host/ every shared library its programs and modules load, from which
# chroot_old_libraries picks the ones the chroot's release lacks.  Returns
# 1 when this system has no such installation.
chroot_add_old_install()
{
	local root=$1 v=$2 old=$1/opt/idempotency-old f
	[ -x "/usr/lib/postgresql/$v/bin/postgres" ] && [ -e "/usr/lib/postgresql/$v/lib/idempotency.so" ] &&
		[ -d "/usr/share/postgresql/$v/extension" ] || return 1
	mkdir -p "$old/usr/lib/postgresql" "$old/usr/share/postgresql" "$old/lib-host"
	cp -a "/usr/lib/postgresql/$v" "$old/usr/lib/postgresql/" &&
		cp -a "/usr/share/postgresql/$v" "$old/usr/share/postgresql/" || return 1
	for f in "/usr/lib/postgresql/$v"/bin/* "/usr/lib/postgresql/$v"/lib/*.so; do
		# (not LLVM's: without it JIT is off, and the tests do without)
		case $f in */llvmjit*.so) continue ;; esac
		ldd "$f" 2>/dev/null
	done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u | while read -r f; do
		cp -L "$f" "$old/lib-host/"
	done
}

# Inside a chroot: the directory (made once) of links to those of
# /opt/idempotency-old/lib-host's libraries that the old PostgreSQL $1's
# programs and modules do not find here.  Prints nothing without one.
chroot_old_libraries()
{
	local v=$1 old=/opt/idempotency-old dir=/opt/idempotency-old/lib-missing f lib
	[ -d "$old/lib-host" ] || return 0
	mkdir -p "$dir"
	# a library found only now can need others: look again, until none is new
	for _ in 1 2 3 4 5; do
		for f in "$old/usr/lib/postgresql/$v"/bin/* "$old/usr/lib/postgresql/$v"/lib/*.so; do
			case $f in */llvmjit*.so) continue ;; esac
			LD_LIBRARY_PATH=$dir ldd "$f" 2>/dev/null
		done | awk '$2 == "=>" && $3 == "not" { print $1 }' | sort -u >"$dir.want"
		[ -s "$dir.want" ] || break
		while read -r lib; do
			[ -e "$old/lib-host/$lib" ] && ln -sf "$old/lib-host/$lib" "$dir/$lib"
		done <"$dir.want"
	done
	rm -f "$dir.want"
	echo "$dir"
}

# The directory that keeps version $1's chroot's downloaded packages.
chroot_apt_cache()
{
	echo "/var/cache/idempotency-apt-$(chroot_suite "$1")$([ "$1" = 19 ] && echo -experimental)"
}

# End every process whose root directory is the chroot $1, then remove it
# (never crossing into a file system mounted below it).
chroot_remove()
{
	local root=$1 p pids
	[ -n "$root" ] && [ -d "$root" ] || return 0
	for _ in 1 2 3; do
		pids=""
		for p in /proc/[0-9]*; do
			[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && pids="$pids ${p#/proc/}"
		done
		[ -z "$pids" ] && break
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null
		sleep 0.5
	done
	rm -rf --one-file-system "$root"
}
