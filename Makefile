# idempotency: PGXS build.  `make && make install`, then see README.md.

EXTENSION = idempotency
MODULE_big = idempotency
OBJS = \
	src/idempotency.o \
	src/settings.o \
	src/statements.o \
	src/store.o \
	src/stamp.o \
	src/session.o \
	src/row.o \
	src/input.o \
	src/citus/shards.o \
	src/claim.o \
	src/claimed.o \
	src/policy.o \
	src/keylock.o \
	src/batch.o \
	src/await.o \
	src/record.o \
	src/hash.o \
	src/expire.o \
	src/stats.o \
	src/shmem.o \
	src/execute.o \
	src/worker.o \
	src/guard.o
# One install script, frozen (0.1.0), and a step for each version after it:
# every version installs as 0.1.0 plus its steps (CONTRIBUTING.md, "Install
# scripts").
DATA = idempotency--0.1.0.sql idempotency--0.1.0--0.2.0.sql idempotency--0.2.0--0.3.0.sql \
       idempotency--0.3.0--0.4.0.sql
PG_CPPFLAGS = -I$(srcdir)/src
PGFILEDESC = "idempotency - idempotency keys for payment APIs"

# Every build warns the same (make, test/run.sh, bench/run.sh, pg_buildext):
# -Wall -Wextra, except -Wunused-parameter, which PostgreSQL's own headers
# trip (static inline functions in lib/ilist.h and storage/bufpage.h ignore
# a parameter), as does every PG_FUNCTION_ARGS function that reads none.
# make WERROR=1 makes every warning an error: the test command (test/run.sh)
# and CI build so, on every PostgreSQL they test; a user's or a packager's
# make does not, so that a newer compiler's new warning does not stop it.
# PG_CFLAGS reaches the compiler that builds the library; PGXS's clang pass
# for the JIT bitcode (.bc) keeps its own flags.
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter
ifdef WERROR
PG_CFLAGS += -Werror
endif

# Tests, after make install (CONTRIBUTING.md, "Tests"), with the PG_CONFIG of the
# server to test:
#   make installcheck        pg_regress over sql/ (expected/), then
#                            pg_isolation_regress over test/specs/
#                            (test/expected/), against the running server
#                            (PGHOST, PGPORT), which needs the settings in
#                            test/regress.conf; then prove over test/t/*.pl
#                            (TAP_TESTS), whose tests start servers of their
#                            own from the installed binaries
#   make installcheck TEMP_INSTANCE=1 TAP_TESTS=
#                            pg_regress and isolation on private servers
#                            that pg_regress starts with test/regress.conf
#                            (test/run.sh: one of the two at a time)
#   make prove_installcheck  the TAP tests alone
#                            (PROVE_TESTS=test/t/010_worker.pl: one)
REGRESS = setup claim attempts batch record hash guc input expire expire_backlog stats execute execute_hostile key_locks owner \
	interval_calendar execute_rules response_dump_size key_lock_secret plans large_response await string_settings execute_cache claim_replay \
	row_security_recorded default_privileges
ISOLATION = claim_commit batch_order claim_rollback claim_nowait claim_vs_complete await \
	claim_repeatable_read claim_serializable takeover execute execute_race \
	guard_index guard_matview guard_sequence guard_mapping_table \
	key_lock_squat scope_probe key_lock_savepoints scope_policy_before_lock scope_policy_cache lease_after_wait restamp_hidden row_type_change
# (row_type_change last: it moves a column of idempotency_keys to a new attnum)
ISOLATION_OPTS = --inputdir=$(srcdir)/test --outputdir=test/output_iso \
	--load-extension=idempotency
# The server the tests run against preloads the library (test/regress.conf),
# unless PRELOAD=0: then it must not (test/regress-no-preload.conf, the
# default configuration), the tests that need the preload are left out and
# sql/no_preload.sql checks what answers differently without it.
# The isolation specs left out are the guard's: without the preload it
# covers a session only from its first key function call (README).
REGRESS_NEEDS_PRELOAD = guc stats
ISOLATION_NEEDS_PRELOAD = guard_index guard_matview guard_sequence \
	guard_mapping_table
REGRESS_CONF = test/regress.conf
ifeq ($(PRELOAD),0)
REGRESS := $(filter-out $(REGRESS_NEEDS_PRELOAD),$(REGRESS)) no_preload
ISOLATION := $(filter-out $(ISOLATION_NEEDS_PRELOAD),$(ISOLATION))
REGRESS_CONF = test/regress-no-preload.conf
endif
ifdef TEMP_INSTANCE
REGRESS_OPTS = --temp-instance=./tmp_check --temp-config=$(srcdir)/$(REGRESS_CONF)
ISOLATION_OPTS += --temp-instance=./tmp_check_iso --temp-config=$(srcdir)/$(REGRESS_CONF)
endif
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# SHA-256 of requests through OpenSSL directly where PostgreSQL is built with
# it (src/hash.c); with_ssl comes from PGXS.
ifeq ($(with_ssl),openssl)
SHLIB_LINK += -lcrypto
endif

# Out-of-tree (VPATH) builds, as pg_buildext makes them for the Debian
# package, need the object directory.
ifdef VPATH
$(shell mkdir -p src/citus)
endif

# The include graph of src/ between modules (tools/include-graph.sh;
# CONTRIBUTING.md, "Layout"): make include-graph prints it.  make WERROR=1
# (the test command's build, on every version) checks it with the build
# and stops on a circular include or an include of the entry point's module.
.PHONY: include-graph include-graph-check
include-graph:
	sh $(srcdir)/tools/include-graph.sh $(srcdir)/src
include-graph-check:
	@out=$$(sh $(srcdir)/tools/include-graph.sh $(srcdir)/src) || { printf '%s\n' "$$out"; exit 1; }
ifdef WERROR
all: include-graph-check
endif

# PGXS has the recipe for prove_installcheck, but no target.
.PHONY: prove_installcheck
prove_installcheck:
	$(prove_installcheck)

# make test [SUITES="regress isolation pgtap tap http package bench"]:
# test/run.sh (as root; installs packages, builds, installs, runs the suites
# named, or all, on every version).  make demo: test/demo.sh
# make edition: the SQL edition's scripts (edition/build.sh), for servers
# where no C extension can be installed (docs/managed.md)
.PHONY: edition
edition:
	bash edition/build.sh

# make dist: the PGXN archive of the commit checked out (META.json says what
# it provides; test/meta.py checks it against the PGXN Meta Spec)
EXTVERSION = $(shell sed -n "s/^default_version = '\\(.*\\)'/\\1/p" $(srcdir)/idempotency.control)
.PHONY: dist
dist:
	mkdir -p dist
	git archive --format zip --prefix=$(EXTENSION)-$(EXTVERSION)/ --output dist/$(EXTENSION)-$(EXTVERSION).zip HEAD

.PHONY: test demo
test:
	bash test/run.sh $(SUITES)
demo:
	bash test/demo.sh

# The slow suites, one target each, as root, after make install, against
# the server PG_CONFIG names (test/suite.sh): check-valgrind (memcheck),
# check-citus (a Citus cluster), check-examples (the HTTP services),
# check-package (the Debian package), check-bench (exactly-once under
# contention), check-monitoring (prometheus-postgres-exporter with
# monitoring/queries.yaml, and the dashboard's metrics).  test/run.sh
# installs their packages, builds, installs and calls these targets, on
# every version.
.PHONY: check-valgrind check-citus check-examples check-package check-bench check-monitoring
check-valgrind check-citus check-package check-bench check-monitoring:
	PG_MAJOR=$(MAJORVERSION) PG_BIN=$(bindir) bash test/suite.sh $(patsubst check-%,%,$@)
check-examples:
	PG_MAJOR=$(MAJORVERSION) PG_BIN=$(bindir) bash test/suite.sh http
