/*
 * idem_claim(): claim an idempotency key or report what is already there,
 * as the C build's src/claim.c (read it for the why of each step).  Each
 * round reads the key's row, decides (new, replay, in_progress, reclaimed,
 * stale, a takeover past max_attempts that makes the key final, or IK001),
 * and a write guarded by the token read starts a new round when the row
 * changed meanwhile.  Before it writes, a claim takes the key's lock
 * (idem__lock_key: with wait => false only tries it), and with wait =>
 * false locks a committed row it updates with SKIP LOCKED: so wait => false
 * never waits for a lock, nor needs a subtransaction (but under row level
 * security, idem__key_lock_id's policy probe).  The times written count
 * from clock_timestamp() taken after the locks; a write that waited after
 * that (an INSERT meeting another writer's row, which only a writer that
 * took no key lock leaves) is moved forward at the end (idem__restamp).
 * await_result polls the row every 10 ms, holding nothing, in READ
 * COMMITTED only, before the claim proper.
 */
CREATE FUNCTION idem_claim(
    key text,
    request jsonb DEFAULT NULL,
    scope text DEFAULT '',
    lease interval DEFAULT NULL,
    retention interval DEFAULT NULL,
    wait boolean DEFAULT true,
    await_result interval DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    OUT outcome text,
    OUT token bigint,
    OUT status idempotency_status,
    OUT response_code integer,
    OUT response jsonb,
    OUT retry_after interval,
    OUT recovery_point text)
RETURNS record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path FROM CURRENT
AS $idem_claim$
DECLARE
    v_key constant text := key;
    v_scope constant text := scope;
    v_lease interval;
    v_retention interval;
    v_max integer;
    v_await interval;
    usecs numeric;
    hash bytea;
    reclaim boolean;
    r record;
    found_row boolean;
    now_ts timestamptz;
    stamp timestamptz;
    lease_end timestamptz;
    deadline timestamptz;
    waited boolean := false;
    act text;
    busy boolean;
    new_token bigint;
    w_token bigint;
    w_status idempotency_status;
    exhausted jsonb;
    round integer := 0;
    maxlen integer;
    prefetched boolean := false;
    held text;                  /* the key lock (idem__lock_key), a new key's */
    rls boolean;
    lock_id bigint;
BEGIN
    /*
     * The common call, in one query (each PL/pgSQL statement costs a
     * replay about as much as a statement of SQL does): no lease,
     * retention, max_attempts or await_result given, wait not null, and
     * every idempotency.* setting empty (so each of them its default, and
     * the key's bound 255 bytes, as below) and not read-only: those the
     * IF tests, without a query, so that a call they exclude costs no
     * more than before.  The query makes the other checks below that such
     * a call needs (key, scope, row level security not recorded), then
     * hashes the request, takes the time and reads the key's row, in that
     * order, as below.  A replay is answered from it; anything else is the
     * first round's, with that row and time.  A check failing leaves the
     * query without a hash: the way below then checks it all again, and
     * raises what it must, as before.  (The request's hash is '' for no
     * request there: the hash of a request is never empty.)  Two fences
     * (OFFSET 0): the checks are computed once, and the request reaches
     * the hash only through them (o.req), so that a custom plan, where
     * the request is a constant, cannot hash it while planning, before
     * the checks (it is IMMUTABLE); the hash and the time are computed
     * once, before the row is read.  The commonest request is hashed
     * without the call (request_hash_fast).
     */
    IF lease IS NULL AND retention IS NULL AND max_attempts IS NULL AND await_result IS NULL
       AND wait IS NOT NULL
       AND COALESCE(pg_catalog.current_setting('idempotency.max_key_length', true), '')
           OPERATOR(pg_catalog.||) COALESCE(pg_catalog.current_setting('idempotency.lease', true), '')
           OPERATOR(pg_catalog.||) COALESCE(pg_catalog.current_setting('idempotency.retention', true), '')
           OPERATOR(pg_catalog.||) COALESCE(pg_catalog.current_setting('idempotency.max_attempts', true), '')
           OPERATOR(pg_catalog.||) COALESCE(pg_catalog.current_setting('idempotency.await_result', true), '')
           OPERATOR(pg_catalog.=) ''
       AND NOT pg_catalog.current_setting('transaction_read_only')::boolean THEN
        SELECT k.*, c.hash AS idem_hash, c.ts AS idem_ts,
               k.expires_at OPERATOR(pg_catalog.>) c.ts
               AND k.request_hash IS NOT DISTINCT FROM CASE WHEN c.hash OPERATOR(pg_catalog.<>) ''::pg_catalog.bytea THEN c.hash END
               AND (k.status OPERATOR(pg_catalog.=) 'completed'
                    OR (k.status OPERATOR(pg_catalog.=) 'failed' AND NOT k.retryable)) AS idem_replay
          INTO r
          FROM (SELECT CASE WHEN o.ok THEN COALESCE(
                           --@ request_hash_fast DOC=o.req PLANNED=fenced
                           , idem_request_hash(o.req), ''::pg_catalog.bytea) END,
                       pg_catalog.clock_timestamp()
                  FROM (SELECT v_key IS NOT NULL AND v_scope IS NOT NULL
                               AND pg_catalog.octet_length(v_key) OPERATOR(pg_catalog.>) 0
                               AND pg_catalog.octet_length(v_key) OPERATOR(pg_catalog.<=) 255
                               AND pg_catalog.octet_length(v_scope) OPERATOR(pg_catalog.<=) 255
                               AND v_key OPERATOR(pg_catalog.!~) E'[\\x01-\\x1f\\x7f]'
                               AND v_scope OPERATOR(pg_catalog.!~) E'[\\x01-\\x1f\\x7f]'
                               AND NOT
                                   --@ role_setting_stored NAME='idempotency.max_key_length='
                               AND NOT EXISTS (SELECT FROM idempotency_settings t
                                                WHERE t.name OPERATOR(pg_catalog.=) 'idempotency.max_key_length')
                               AND NOT
                                   --@ row_security_in_use SCHEMA=
                               ,
                               request
                        OFFSET 0) AS o(ok, req)
                OFFSET 0) AS c(hash, ts)
          LEFT JOIN idempotency_keys AS k
            ON c.hash IS NOT NULL AND k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key;
        IF r.idem_replay THEN
            outcome := 'replay';
            status := r.status;
            response_code := r.response_code;
            response := r.response;
            RETURN;
        END IF;
        IF r.idem_hash IS NOT NULL AND r.key IS NULL THEN
            /*
             * A new key: the loop's first round for no row (act insert),
             * without the loop's bookkeeping, in the same order: the key's
             * lock (busy: in_progress), the token, the time, the INSERT; the
             * lease and retention the defaults, 60 s and 86400 s, as below.
             * Nothing written: another writer's row came meanwhile, and the
             * loop's next round (the second) reads it.
             */
            /*
             * idem__lock_key(v_scope, v_key, wait) here, for its common
             * case (a function call with a SET clause costs more than its
             * work): the locks held (the setting), row level security and,
             * without it, the key's lock id, in one query; with row level
             * security (the probe), the lock held already or 64 held,
             * idem__lock_key itself; else the lock in a block of its own (a
             * subtransaction: see idem__lock_key), then the setting.
             */
            SELECT COALESCE(pg_catalog.current_setting('idempotency_edition.key_locks', true), ''),
                   c.relrowsecurity,
                   CASE WHEN NOT c.relrowsecurity THEN
                       --@ key_lock_id SECRET=idem__key_lock_secret(v_scope) KEY=v_key
                   END
              INTO held, rls, lock_id
              FROM pg_catalog.pg_class c
             WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency_keys'::pg_catalog.regclass;
            IF rls OR pg_catalog.strpos(',' OPERATOR(pg_catalog.||) held OPERATOR(pg_catalog.||) ',',
                                        ',' OPERATOR(pg_catalog.||) lock_id::text OPERATOR(pg_catalog.||) ',') OPERATOR(pg_catalog.>) 0
               OR (held OPERATOR(pg_catalog.<>) ''
                   AND pg_catalog.array_length(pg_catalog.string_to_array(held, ','), 1) OPERATOR(pg_catalog.>=) 64) THEN
                busy := NOT idem__lock_key(v_scope, v_key, wait);
            ELSE
                BEGIN
                    busy := NOT CASE WHEN wait THEN pg_catalog.pg_advisory_xact_lock(lock_id)::text OPERATOR(pg_catalog.=) ''
                                     ELSE pg_catalog.pg_try_advisory_xact_lock(lock_id) END;
                EXCEPTION WHEN SQLSTATE 'IKP02' THEN    /* raised by nothing: the clause makes the block a subtransaction */
                    RAISE;
                END;
                IF NOT busy THEN
                    held := pg_catalog.set_config('idempotency_edition.key_locks',
                        CASE WHEN held OPERATOR(pg_catalog.=) '' THEN lock_id::text
                             ELSE held OPERATOR(pg_catalog.||) ',' OPERATOR(pg_catalog.||) lock_id::text END, true);
                END IF;
            END IF;
            IF busy THEN
                outcome := 'in_progress';
                status := 'processing';
                retry_after := '1 second'::interval;
                RETURN;
            END IF;
            --@ next_token VAR=new_token SEQ=idempotency_token_seq
            stamp := pg_catalog.clock_timestamp();
            INSERT INTO idempotency_keys AS k (scope, key, status, token, locked_until,
                                               created_at, updated_at, expires_at, request_hash, due_at)
            VALUES (v_scope, v_key, 'processing', new_token,
                    stamp OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => 60),
                    stamp, stamp,
                    (stamp OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => 60))
                        OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => 86400),
                    CASE WHEN r.idem_hash OPERATOR(pg_catalog.<>) ''::pg_catalog.bytea THEN r.idem_hash END,
                    stamp OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => 60))
            ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO NOTHING
            RETURNING 'new', k.token, k.status INTO outcome, token, status;
            IF token IS NOT NULL THEN
                /* the write waited after its stamp (another writer's row): count from now */
                IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) stamp OPERATOR(pg_catalog.>) '10 ms'::interval THEN
                    PERFORM idem__restamp(v_scope, ARRAY[v_key], ARRAY[token], stamp);
                END IF;
                RETURN;
            END IF;
            /* (nothing written: outcome, token and status are NULL again) */
            round := 1;
            hash := CASE WHEN r.idem_hash OPERATOR(pg_catalog.<>) ''::pg_catalog.bytea THEN r.idem_hash END;
            v_lease := pg_catalog.make_interval(secs => 60);
            v_retention := pg_catalog.make_interval(secs => 86400);
            v_max := 0;
        ELSIF r.idem_hash IS NOT NULL THEN
            prefetched := true;
            now_ts := r.idem_ts;
            hash := CASE WHEN r.idem_hash OPERATOR(pg_catalog.<>) ''::pg_catalog.bytea THEN r.idem_hash END;
            v_lease := pg_catalog.make_interval(secs => 60);
            v_retention := pg_catalog.make_interval(secs => 86400);
            v_max := 0;
        END IF;
    END IF;
    IF NOT prefetched AND round OPERATOR(pg_catalog.=) 0 THEN
        --@ check_key KEY=v_key SCOPE=v_scope SCHEMA=
        /*
         * idem__lease() and the others read here: their function calls only for
         * a setting that is set (each a call with a SET clause; the defaults as
         * they return them)
         */
        v_lease := COALESCE(lease,
            CASE WHEN COALESCE(pg_catalog.current_setting('idempotency.lease', true), '') OPERATOR(pg_catalog.=) ''
                 THEN pg_catalog.make_interval(secs => 60) ELSE idem__lease() END);
        v_retention := COALESCE(retention,
            CASE WHEN COALESCE(pg_catalog.current_setting('idempotency.retention', true), '') OPERATOR(pg_catalog.=) ''
                 THEN pg_catalog.make_interval(secs => 86400) ELSE idem__retention() END);
        now_ts := pg_catalog.clock_timestamp();
        /*
         * A lease or retention read from its setting (1 s to 2^31-1 s, checked
         * there) passes idem__check_interval always: only given ones need it.
         */
        IF lease IS NOT NULL THEN
            PERFORM idem__check_interval(v_lease, 'lease', now_ts, v_key, v_scope);
        END IF;
        IF retention IS NOT NULL THEN
            PERFORM idem__check_interval(v_retention, 'retention', now_ts OPERATOR(pg_catalog.+) v_lease, v_key, v_scope);
        END IF;
        v_max := CASE WHEN COALESCE(pg_catalog.current_setting('idempotency.max_attempts', true), '') OPERATOR(pg_catalog.=) ''
                      THEN 0 ELSE idem__max_attempts() END;
        v_await := CASE WHEN COALESCE(pg_catalog.current_setting('idempotency.await_result', true), '') OPERATOR(pg_catalog.=) ''
                        THEN NULL ELSE idem__await_result() END;
        IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
            RAISE EXCEPTION USING ERRCODE = '25006',
                MESSAGE = 'cannot execute idem_claim() in a read-only transaction';
        END IF;
        IF wait IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'wait must not be null',
                DETAIL = pg_catalog.format('Key "%s" in scope "%s".', v_key, v_scope);
        END IF;
        IF max_attempts IS NOT NULL THEN
            IF max_attempts OPERATOR(pg_catalog.<) 0 THEN
                RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'max_attempts must not be negative',
                    DETAIL = pg_catalog.format('Key "%s" in scope "%s".', v_key, v_scope),
                    HINT = '0 means no limit.';
            END IF;
            v_max := max_attempts;
        END IF;
        IF await_result IS NOT NULL THEN
            /* as the C build counts it: a month 30 days, a day 24 hours */
            usecs := (((EXTRACT(year FROM await_result) OPERATOR(pg_catalog.*) 12
                        OPERATOR(pg_catalog.+) EXTRACT(month FROM await_result)) OPERATOR(pg_catalog.*) 30
                       OPERATOR(pg_catalog.+) EXTRACT(day FROM await_result)) OPERATOR(pg_catalog.*) 86400000000)
                     OPERATOR(pg_catalog.+) (EXTRACT(epoch FROM await_result OPERATOR(pg_catalog.-)
                            pg_catalog.make_interval(
                                months => (EXTRACT(year FROM await_result) OPERATOR(pg_catalog.*) 12
                                           OPERATOR(pg_catalog.+) EXTRACT(month FROM await_result))::integer,
                                days => EXTRACT(day FROM await_result)::integer)) OPERATOR(pg_catalog.*) 1000000);
            IF usecs OPERATOR(pg_catalog.<) 0 THEN
                RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'await_result must not be negative',
                    DETAIL = pg_catalog.format('Key "%s" in scope "%s".', v_key, v_scope),
                    HINT = 'Pass how long to wait for a claim in flight of the key, such as ''2 s''; 0 or NULL does not wait.';
            END IF;
            IF usecs OPERATOR(pg_catalog.>) 3600000000 THEN
                RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'await_result is too long',
                    DETAIL = pg_catalog.format('Key "%s" in scope "%s".', v_key, v_scope),
                    HINT = 'The longest is 1 hour.';
            END IF;
            v_await := CASE WHEN usecs OPERATOR(pg_catalog.=) 0 THEN NULL ELSE await_result END;
        END IF;
        hash := CASE WHEN request IS NULL THEN NULL ELSE idem_request_hash(request) END;
        IF
            --@ row_security_in_use SCHEMA=
        THEN
            PERFORM idem__check_row_security();
        END IF;
    END IF;

    /* await_result: wait, holding nothing, for a claim in flight */
    IF v_await IS NOT NULL
       AND pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.=) 'read committed'
       AND pg_catalog.pg_current_xact_id_if_assigned() IS NULL
       AND idem__key_locks_held() OPERATOR(pg_catalog.=) 0 THEN
        deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) v_await;
        LOOP
            now_ts := pg_catalog.clock_timestamp();
            SELECT k.* INTO r FROM idempotency_keys k
             WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key;
            EXIT WHEN NOT FOUND OR r.status OPERATOR(pg_catalog.<>) 'processing'
                   OR r.locked_until IS NULL OR r.locked_until OPERATOR(pg_catalog.<=) now_ts
                   OR r.expires_at OPERATOR(pg_catalog.<=) now_ts
                   OR r.request_hash IS DISTINCT FROM hash
                   OR now_ts OPERATOR(pg_catalog.>=) deadline;
            /*
             * about to wait: not while this backend holds a lock another
             * transaction may wait for (an advisory lock of SQL's, not an
             * extension's such as Citus's; a table locked in a mode
             * stronger than ROW EXCLUSIVE, named: pg_locks also shows
             * SIReadLock, predicate locks nothing waits for): the holder
             * might be waiting for it, a cycle the deadlock detector
             * cannot see
             */
            EXIT WHEN NOT waited AND EXISTS (
                SELECT FROM pg_catalog.pg_locks l
                 WHERE l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid() AND l.granted
                   AND ((l.locktype OPERATOR(pg_catalog.=) 'advisory'
                         AND l.objsubid OPERATOR(pg_catalog.=) ANY ('{1,2}'::pg_catalog.int2[]))
                        OR (l.locktype OPERATOR(pg_catalog.=) 'relation'
                            AND l.mode OPERATOR(pg_catalog.=) ANY
                                (ARRAY['ShareUpdateExclusiveLock', 'ShareLock', 'ShareRowExclusiveLock',
                                       'ExclusiveLock', 'AccessExclusiveLock']))));
            waited := true;
            PERFORM pg_catalog.pg_sleep(GREATEST(0.001, LEAST(0.01,
                EXTRACT(epoch FROM LEAST(deadline, r.locked_until, r.expires_at) OPERATOR(pg_catalog.-) now_ts))));
        END LOOP;
    END IF;

    LOOP
        IF round OPERATOR(pg_catalog.>=) 100 THEN
            RAISE EXCEPTION USING ERRCODE = '40001',
                MESSAGE = 'could not claim idempotency key: it kept changing',
                DETAIL = pg_catalog.format('Key "%s" in scope "%s" changed %s times while it was being claimed.', v_key, v_scope, round),
                HINT = 'Retry the transaction.';
        END IF;
        round := round OPERATOR(pg_catalog.+) 1;
        IF prefetched THEN
            /* the first round: the row read above */
            prefetched := false;
            found_row := r.key IS NOT NULL;
        ELSE
            now_ts := pg_catalog.clock_timestamp();
            SELECT k.* INTO r FROM idempotency_keys k
             WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key;
            found_row := FOUND;
        END IF;
        /*
         * idempotency.stale_policy only where it decides (a row past its
         * expiry or its lease): reading it is a catalog read for a
         * session that is not a superuser's (idem__setting)
         */
        IF reclaim IS NULL AND found_row
           AND (r.expires_at OPERATOR(pg_catalog.<=) now_ts
                OR (r.status OPERATOR(pg_catalog.=) 'processing'
                    AND (r.locked_until IS NULL OR r.locked_until OPERATOR(pg_catalog.<=) now_ts))) THEN
            reclaim := idem__stale_reclaim();
        END IF;

        /* DecideClaim */
        IF NOT found_row THEN
            act := 'insert';
        ELSIF r.expires_at OPERATOR(pg_catalog.<=) now_ts AND (reclaim OR r.status OPERATOR(pg_catalog.<>) 'processing') THEN
            act := 'renew';
        ELSIF r.request_hash IS DISTINCT FROM hash THEN
            RAISE EXCEPTION USING ERRCODE = 'IK001',
                MESSAGE = 'idempotency key was already used with a different request',
                DETAIL = pg_catalog.format('Key "%s" in scope "%s" was first claimed with another request.', v_key, v_scope),
                HINT = 'Send the original request again, or use a new key for a new request.';
        ELSIF r.status OPERATOR(pg_catalog.=) 'completed' OR (r.status OPERATOR(pg_catalog.=) 'failed' AND NOT r.retryable) THEN
            act := 'replay';
        ELSIF r.status OPERATOR(pg_catalog.=) 'processing' AND r.locked_until OPERATOR(pg_catalog.>) now_ts THEN
            act := 'in_progress';
        ELSIF r.status OPERATOR(pg_catalog.=) 'processing' AND NOT reclaim THEN
            act := 'stale';
        ELSIF v_max OPERATOR(pg_catalog.>) 0 AND r.attempts OPERATOR(pg_catalog.>=) v_max THEN
            act := 'exhaust';
        ELSE
            act := 'takeover';
        END IF;

        IF act IN ('replay', 'in_progress', 'stale') THEN
            outcome := act;
            status := r.status;
            IF act OPERATOR(pg_catalog.=) 'replay' THEN
                response_code := r.response_code;
                response := r.response;
            ELSIF act OPERATOR(pg_catalog.=) 'in_progress' THEN
                retry_after := r.locked_until OPERATOR(pg_catalog.-) now_ts;
            ELSE
                recovery_point := r.recovery_point;
            END IF;
            RETURN;
        END IF;

        /* a write: the key's lock, and for an update with wait => false the row's (ClaimWrite) */
        busy := NOT idem__lock_key(v_scope, v_key, wait);
        IF NOT busy AND NOT wait AND act OPERATOR(pg_catalog.<>) 'insert' THEN
            PERFORM FROM idempotency_keys k
              WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key
                FOR NO KEY UPDATE SKIP LOCKED;
            busy := NOT FOUND;
        END IF;
        IF busy THEN
            outcome := 'in_progress';
            status := 'processing';
            retry_after := '1 second'::interval;
            RETURN;
        END IF;

        --@ next_token VAR=new_token SEQ=idempotency_token_seq
        /* the write's times: after every lock and wait so far */
        stamp := pg_catalog.clock_timestamp();
        w_token := NULL;
        IF act OPERATOR(pg_catalog.=) 'insert' THEN
            lease_end := stamp OPERATOR(pg_catalog.+) v_lease;
            INSERT INTO idempotency_keys AS k (scope, key, status, token, locked_until,
                                               created_at, updated_at, expires_at, request_hash, due_at)
            VALUES (v_scope, v_key, 'processing', new_token, lease_end,
                    stamp, stamp, lease_end OPERATOR(pg_catalog.+) v_retention, hash, lease_end)
            ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO NOTHING
            RETURNING k.token, k.status INTO w_token, w_status;
        ELSIF act OPERATOR(pg_catalog.=) 'renew' THEN
            lease_end := stamp OPERATOR(pg_catalog.+) v_lease;
            UPDATE idempotency_keys AS k
               SET status = 'processing', token = new_token, locked_until = lease_end,
                   expires_at = lease_end OPERATOR(pg_catalog.+) v_retention,
                   due_at = lease_end, attempts = 1,
                   created_at = stamp, updated_at = stamp, request_hash = hash, retryable = true,
                   response_code = NULL, response = NULL, recovery_point = NULL
             WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key
               AND k.token OPERATOR(pg_catalog.=) r.token AND k.expires_at OPERATOR(pg_catalog.<=) stamp
               AND (reclaim OR k.status OPERATOR(pg_catalog.<>) 'processing')
            RETURNING k.token, k.status INTO w_token, w_status;
        ELSIF act OPERATOR(pg_catalog.=) 'takeover' THEN
            lease_end := stamp OPERATOR(pg_catalog.+) v_lease;
            UPDATE idempotency_keys AS k
               SET status = 'processing', token = new_token, locked_until = lease_end,
                   expires_at = lease_end OPERATOR(pg_catalog.+) v_retention,
                   due_at = lease_end, attempts = k.attempts OPERATOR(pg_catalog.+) 1,
                   retryable = true, response_code = NULL, response = NULL, updated_at = stamp
             WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key
               AND k.token OPERATOR(pg_catalog.=) r.token AND k.expires_at OPERATOR(pg_catalog.>) stamp
               AND ((k.status OPERATOR(pg_catalog.=) 'failed' AND k.retryable)
                    OR (reclaim AND k.status OPERATOR(pg_catalog.=) 'processing'
                        AND (k.locked_until IS NULL OR k.locked_until OPERATOR(pg_catalog.<=) stamp)))
            RETURNING k.token, k.status INTO w_token, w_status;
        ELSE
            /* exhaust: final, failed, not retryable, under a new token; no lease */
            exhausted := pg_catalog.jsonb_build_object('error', 'attempts_exhausted',
                             'attempts', r.attempts, 'max_attempts', v_max, 'last_response', r.response);
            IF r.response IS NOT NULL AND NOT idem_row_storable(exhausted, NULL::pg_catalog.text, NULL::pg_catalog.bytea) THEN
                exhausted := pg_catalog.jsonb_build_object('error', 'attempts_exhausted',
                                 'attempts', r.attempts, 'max_attempts', v_max, 'last_response', NULL,
                                 'last_response_omitted', 'too large to store inside this response');
            END IF;
            lease_end := stamp;
            UPDATE idempotency_keys AS k
               SET status = 'failed', retryable = false, token = new_token, locked_until = NULL,
                   response = exhausted, updated_at = stamp,
                   expires_at = stamp OPERATOR(pg_catalog.+) v_retention,
                   due_at = stamp OPERATOR(pg_catalog.+) v_retention
             WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key
               AND k.token OPERATOR(pg_catalog.=) r.token AND k.expires_at OPERATOR(pg_catalog.>) stamp
               AND ((k.status OPERATOR(pg_catalog.=) 'failed' AND k.retryable)
                    OR (reclaim AND k.status OPERATOR(pg_catalog.=) 'processing'
                        AND (k.locked_until IS NULL OR k.locked_until OPERATOR(pg_catalog.<=) stamp)))
               AND k.attempts OPERATOR(pg_catalog.>=) v_max
            RETURNING k.token, k.status INTO w_token, w_status;
        END IF;

        IF w_token IS NOT NULL THEN
            /* the write waited after its stamp (another writer's row): count from now */
            IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) stamp OPERATOR(pg_catalog.>) '10 ms'::interval THEN
                PERFORM idem__restamp(v_scope, ARRAY[v_key], ARRAY[w_token], stamp);
            END IF;
            IF act OPERATOR(pg_catalog.=) 'exhaust' THEN
                outcome := 'replay';
                status := 'failed';
                response_code := r.response_code;
                response := exhausted;
            ELSE
                outcome := CASE WHEN act OPERATOR(pg_catalog.=) 'takeover' THEN 'reclaimed' ELSE 'new' END;
                token := w_token;
                status := w_status;
                IF act OPERATOR(pg_catalog.=) 'takeover' THEN
                    recovery_point := r.recovery_point;
                END IF;
            END IF;
            RETURN;
        END IF;
        /* else the row changed meanwhile: read it again */
    END LOOP;
END
$idem_claim$;
COMMENT ON FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer) IS
    'Claims an idempotency key or reports what is there: outcome new, replay, in_progress, reclaimed or stale';
