-- The SQL edition only (test/edition/sql/): sql/key_locks.sql with the edition's
-- key lock tag (int8 advisory locks, objsubid 1, where the C build's are 7653),
-- so that the 64-lock cap is checked on the edition too.
\set SHOW_CONTEXT never
-- Key locks: a transaction holds at most 64 (keylock.c), by every path a
-- role holding only idempotency_app can take, and a lock held already is
-- not counted again.  Each block counts the key locks the backend holds in
-- pg_locks, and the key locks it holds past the cap must be none.
CREATE ROLE regress_locks_app;
GRANT idempotency_app TO regress_locks_app;
GRANT CREATE ON SCHEMA public TO regress_locks_app;
SET ROLE regress_locks_app;
CREATE FUNCTION held_key_locks() RETURNS bigint LANGUAGE sql AS
$$ SELECT count(*) FROM pg_locks
   WHERE locktype = 'advisory' AND objsubid = 1 AND pid = pg_backend_pid() AND granted $$;

-- a cursor's FETCH claims under its portal, inside savepoints rolled back
-- (the portal opened before them): each rollback releases what it took
BEGIN;
DECLARE c CURSOR FOR
  SELECT c.outcome FROM generate_series(1, 100000) g, idem_claim('cur-' || g, NULL, 'locks') c;
DO $$
DECLARE
  r refcursor := 'c';
BEGIN
  FOR i IN 1..30 LOOP
    BEGIN
      MOVE FORWARD 50 FROM r;
      RAISE EXCEPTION 'rolled back';
    EXCEPTION WHEN raise_exception THEN NULL;
    END;
  END LOOP;
END $$;
SELECT held_key_locks() AS after_rolled_back_fetches;
SAVEPOINT s;
FETCH 10 FROM c;
ROLLBACK TO s;
FETCH 100 FROM c \g /dev/null
SELECT held_key_locks() AS after_fetching_100;
ROLLBACK;

-- functions with exception blocks, nested
BEGIN;
DO $$
BEGIN
  FOR i IN 1..200 LOOP
    BEGIN
      PERFORM idem_claim('fn-' || i, NULL, 'locks');
      IF i % 3 = 0 THEN RAISE EXCEPTION 'item failed'; END IF;
    EXCEPTION WHEN raise_exception THEN NULL;
    END;
  END LOOP;
END $$;
SELECT held_key_locks() AS after_function;
ROLLBACK;

-- a procedure that commits: each transaction holds at most the cap
CREATE PROCEDURE claim_in_chunks(INOUT most bigint) LANGUAGE plpgsql AS $$
BEGIN
  most := 0;
  FOR chunk IN 1..3 LOOP
    PERFORM idem_claim('proc-' || chunk || '-' || g, NULL, 'locks') FROM generate_series(1, 100) g;
    most := greatest(most, held_key_locks());
    COMMIT;
  END LOOP;
END $$;
CALL claim_in_chunks(NULL);
SELECT held_key_locks() AS after_procedure;

-- a lock held already is not counted again: 40 keys whose leases ran out,
-- taken over by a batch (which locks each key before it writes and again to
-- take it over), then 24 new keys: all 64 hold their lock
SELECT count(*) FROM generate_series(1, 40) g, idem_claim('over-' || g, NULL, 'locks', lease => '1 ms');
SELECT pg_sleep(0.01);
BEGIN;
SELECT outcome, count(*) FROM idem_claim_batch(ARRAY(SELECT 'over-' || g FROM generate_series(1, 40) g), scope => 'locks')
GROUP BY outcome;
SELECT count(*) FROM generate_series(1, 24) g, idem_claim('after-' || g, NULL, 'locks');
SELECT held_key_locks() AS all_locked;
ROLLBACK;

-- a batch of 1000 new keys holds the cap
BEGIN;
SELECT count(*) FROM idem_claim_batch(ARRAY(SELECT 'big-' || g FROM generate_series(1, 1000) g), scope => 'locks');
SELECT held_key_locks() AS after_big_batch;
ROLLBACK;

-- a batch keeps no lock of a key it only reads: two replays, one new key
BEGIN;
SELECT outcome FROM idem_claim('done-1', NULL, 'locks');
SELECT idem_complete('done-1', 200, '{}', 'locks');
SELECT outcome FROM idem_claim('done-2', NULL, 'locks');
SELECT idem_complete('done-2', 200, '{}', 'locks');
COMMIT;
BEGIN;
SELECT key, outcome FROM idem_claim_batch(ARRAY['done-1', 'done-2', 'fresh'], scope => 'locks');
SELECT held_key_locks() AS batch_locks;
ROLLBACK;

DELETE FROM idempotency_keys WHERE scope = 'locks';
DROP PROCEDURE claim_in_chunks;
DROP FUNCTION held_key_locks;
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM regress_locks_app;
DROP ROLE regress_locks_app;
