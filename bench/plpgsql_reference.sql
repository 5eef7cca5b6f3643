-- bench/plpgsql_reference.sql: the hand-written PL/pgSQL claim / complete a
-- team would write instead of the extension, for the benchmark's comparison.
--
-- Same columns, primary key and indexes as idempotency_keys, a sequence for
-- fencing tokens, INSERT ... ON CONFLICT DO NOTHING to claim (a duplicate
-- waits for an uncommitted first claim, like the extension), and SHA-256 of
-- the request's text (jsonb's output, so key order and spacing do not
-- matter) checked on every path.  Leases, takeover of a stale or retryably
-- failed claim, expiry of old rows, 409 with Retry-After: all there, the way
-- a careful team would write them.  What it lacks next to the extension:
-- number normalisation in the hash, fencing of late holders outside the
-- claiming transaction by default, stats, the worker, and C.
--
-- Used like the extension's explicit pattern:
--   BEGIN; SELECT * FROM ref_claim(key, request, scope);
--   INSERT INTO payments ...; SELECT ref_complete(key, 201, response, scope); COMMIT;

CREATE SEQUENCE ref_token_seq AS bigint;

CREATE TABLE ref_keys (
    scope          text NOT NULL DEFAULT '',
    key            text NOT NULL,
    status         text NOT NULL CHECK (status IN ('processing', 'completed', 'failed')),
    retryable      boolean NOT NULL DEFAULT true,
    response_code  integer,
    token          bigint NOT NULL,
    locked_until   timestamptz,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    request_hash   bytea,
    recovery_point text,
    response       jsonb,
    PRIMARY KEY (scope, key)
);
CREATE INDEX ref_keys_expires_at_idx ON ref_keys (expires_at);
CREATE INDEX ref_keys_lease_idx ON ref_keys (locked_until) WHERE status = 'processing';

CREATE FUNCTION ref_claim(
    p_key text,
    p_request jsonb DEFAULT NULL,
    p_scope text DEFAULT '',
    p_lease interval DEFAULT '60 s',
    p_retention interval DEFAULT '24 h',
    OUT outcome text,
    OUT token bigint,
    OUT response_code integer,
    OUT response jsonb,
    OUT retry_after interval,
    OUT recovery_point text)
LANGUAGE plpgsql AS $$
DECLARE
    h bytea := sha256(convert_to(p_request::text, 'UTF8'));
    r ref_keys%ROWTYPE;
BEGIN
    IF p_key IS NULL OR p_key = '' OR p_scope IS NULL THEN
        RAISE EXCEPTION 'idempotency key and scope are required' USING ERRCODE = '22023';
    END IF;
    LOOP
        INSERT INTO ref_keys AS k (scope, key, status, token, locked_until, created_at, updated_at,
                                   expires_at, request_hash)
        VALUES (p_scope, p_key, 'processing', nextval('ref_token_seq'), now() + p_lease, now(), now(),
                now() + p_lease + p_retention, h)
        ON CONFLICT (scope, key) DO NOTHING
        RETURNING k.token INTO token;
        IF FOUND THEN
            outcome := 'new';
            RETURN;
        END IF;

        SELECT * INTO r FROM ref_keys k WHERE k.scope = p_scope AND k.key = p_key;
        CONTINUE WHEN NOT FOUND;        -- deleted in between: claim again

        IF r.request_hash IS DISTINCT FROM h THEN
            RAISE EXCEPTION 'idempotency key "%" reused with a different request', p_key
                USING ERRCODE = 'P0001';
        END IF;

        IF r.expires_at <= now()
           OR (r.status = 'processing' AND r.locked_until <= now())
           OR (r.status = 'failed' AND r.retryable) THEN
            -- expired, stale or retryable: take it over, fenced by the old token
            UPDATE ref_keys k
               SET status = 'processing', token = nextval('ref_token_seq'), locked_until = now() + p_lease,
                   updated_at = now(), expires_at = now() + p_lease + p_retention,
                   response_code = NULL, response = NULL,
                   recovery_point = CASE WHEN r.expires_at <= now() THEN NULL ELSE k.recovery_point END,
                   created_at = CASE WHEN r.expires_at <= now() THEN now() ELSE k.created_at END
             WHERE k.scope = p_scope AND k.key = p_key AND k.token = r.token
            RETURNING k.token, k.recovery_point INTO token, recovery_point;
            CONTINUE WHEN NOT FOUND;    -- somebody else took it: look again
            outcome := CASE WHEN r.expires_at <= now() THEN 'new' ELSE 'reclaimed' END;
            RETURN;
        END IF;

        IF r.status = 'processing' THEN
            outcome := 'in_progress';
            retry_after := r.locked_until - now();
        ELSE
            outcome := 'replay';
            response_code := r.response_code;
            response := r.response;
        END IF;
        RETURN;
    END LOOP;
END $$;

CREATE FUNCTION ref_complete(
    p_key text,
    p_response_code integer,
    p_response jsonb,
    p_scope text DEFAULT '',
    p_token bigint DEFAULT NULL,
    p_retention interval DEFAULT '24 h')
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ref_keys k
       SET status = 'completed', response_code = p_response_code, response = p_response,
           locked_until = NULL, updated_at = now(), expires_at = now() + p_retention
     WHERE k.scope = p_scope AND k.key = p_key AND k.status = 'processing'
       AND (p_token IS NULL OR k.token = p_token);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'idempotency key "%" is not processing or the token is stale', p_key
            USING ERRCODE = 'P0001';
    END IF;
END $$;
