# shellcheck shell=bash
# bench/chroot.sh: a bench script for a PostgreSQL major version that this
# system does not have (PG_MAJOR=18 on bookworm, say) runs itself again in a
# chroot of that version's Debian release, made as test/run.sh makes its own
# (test/lib/chroot.sh: the cached base system, the machine's apt settings,
# a package cache per suite), with the tree copied in, and its results
# copied back to bench/results/.  Sourced from the repository root by
# bench/run.sh and bench/profile.sh, after test/lib/common.sh:
#
#   bench_maybe_in_chroot bench/run.sh "$@"   # returns if PG_BIN is here
#
# Inside, IDEM_IN_CHROOT=1 stops the recursion and IDEM_COMMIT names the
# commit (the copy has no .git).
bench_maybe_in_chroot()
{
	local script=$1 suite root args rc=0
	shift
	[ -x "$PG_BIN/postgres" ] || [ -n "${IDEM_IN_CHROOT:-}" ] && return 0
	. test/lib/chroot.sh
	suite=$(chroot_suite "$PG_MAJOR") ||
		{ echo "no Debian release known for PostgreSQL $PG_MAJOR" >&2; exit 2; }
	[ "$(host_codename)" = "$suite" ] && return 0   # installs it here instead
	root=$(mktemp -d "/var/tmp/idempotency-bench-pg$PG_MAJOR.XXXXXX")
	# shellcheck disable=SC2064
	trap "chroot_remove '$root'" EXIT
	trap 'exit 130' INT TERM
	printf '== PostgreSQL %s: in a Debian %s chroot (%s)\n' "$PG_MAJOR" "$suite" "$root" >&2
	chroot_make "$root" "$suite" "$PG_MAJOR" >"$root.log" 2>&1 || { cat "$root.log" >&2; rm -f "$root.log"; exit 1; }
	rm -f "$root.log"
	mkdir -p "$root/work/project"
	tar --exclude=./.git --exclude='./regression.*' --exclude='./tmp_check*' --exclude=./log \
		--exclude=./test/results --exclude=./test/tmp_check --exclude=node_modules \
		--exclude='*.o' --exclude='*.bc' --exclude='*.so' -cf - . | tar -C "$root/work/project" -xf -
	touch "$root/work/project/.bench-start"
	args=""
	[ $# -gt 0 ] && args=$(printf '%q ' "$@")
	chroot_exec "$root" "IDEM_IN_CHROOT=1 IDEM_COMMIT='$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (with changes)')' PG_MAJOR=$PG_MAJOR bash $script $args" \
		"$(chroot_apt_cache "$PG_MAJOR")" || rc=$?
	# the results the run wrote (newer than the copy), back into the tree
	mkdir -p bench/results
	find "$root/work/project/bench/results" -name "*-pg$PG_MAJOR.txt" -newer "$root/work/project/.bench-start" \
		-exec cp -v {} bench/results/ \; >&2
	exit "$rc"
}
