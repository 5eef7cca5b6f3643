-- bench/plpgsql_reference.sql: the hand-written PL/pgSQL claim/complete a team
-- would write instead of the extension, for the benchmark's comparison.
CREATE TABLE ref_keys (
    key           text PRIMARY KEY,
    status        text NOT NULL,
    request_hash  bytea,
    response_code int,
    response      jsonb,
    locked_until  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL
);
CREATE INDEX ON ref_keys (expires_at);

CREATE FUNCTION ref_claim(k text, req jsonb, OUT outcome text, OUT response_code int, OUT response jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    h bytea := sha256(convert_to(req::text, 'UTF8'));
    r ref_keys;
BEGIN
    INSERT INTO ref_keys (key, status, request_hash, locked_until, expires_at)
    VALUES (k, 'processing', h, now() + interval '60 s', now() + interval '1 day')
    ON CONFLICT (key) DO NOTHING;
    IF FOUND THEN
        outcome := 'new';
        RETURN;
    END IF;
    SELECT * INTO r FROM ref_keys WHERE key = k;
    IF r.request_hash IS DISTINCT FROM h THEN
        RAISE EXCEPTION 'key reused with a different request' USING ERRCODE = 'P0001';
    END IF;
    IF r.status = 'completed' THEN
        outcome := 'replay';
        response_code := r.response_code;
        response := r.response;
    ELSE
        outcome := 'in_progress';
    END IF;
END $$;

CREATE FUNCTION ref_complete(k text, code int, resp jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ref_keys SET status = 'completed', response_code = code, response = resp,
           locked_until = NULL, expires_at = now() + interval '1 day'
    WHERE key = k AND status = 'processing';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'key is not processing' USING ERRCODE = 'P0001';
    END IF;
END $$;
