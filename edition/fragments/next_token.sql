-- next_token (edition/build.sh expands "--@ next_token VAR=.. SEQ=.."):
-- VAR (bigint) := the token sequence's next value, refused past 48 bits
-- as the C build refuses it (store.c).  SEQ names the sequence as the body
-- reaches it: idempotency_token_seq, or in a body installed by EXECUTE
-- (idem_execute.sql) _IDEM_SCHEMA_.idempotency_token_seq.
%VAR% := pg_catalog.nextval('%SEQ%'::pg_catalog.regclass);
IF %VAR% OPERATOR(pg_catalog.<=) 0 OR %VAR% OPERATOR(pg_catalog.>=) 281474976710656 THEN
    RAISE EXCEPTION USING ERRCODE = '54000',
        MESSAGE = 'idempotency_token_seq is exhausted on this node',
        DETAIL = pg_catalog.format('Tokens keep the sequence''s value in %s bits; it is %s.', 48, %VAR%);
END IF;
