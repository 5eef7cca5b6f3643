-- check_key (edition/build.sh expands "--@ check_key KEY=.. SCOPE=.. SCHEMA=.."):
-- idem__check_key(KEY, SCOPE)'s checks inlined in a PL/pgSQL body, that
-- function called (to raise what it raises) only when one fails; the
-- variable maxlen (integer) must be declared.  SCHEMA is '' or, in a body
-- installed by EXECUTE (idem_execute.sql), _IDEM_SCHEMA_.
/* idem__check_key's checks here; it runs (and raises) only when one fails */
IF %KEY% IS NULL OR %SCOPE% IS NULL THEN
    PERFORM %SCHEMA%idem__check_key(%KEY%, %SCOPE%);
END IF;
/*
 * idem__max_key_length(): 255 without a call when the setting is empty in
 * the session and stored for no database or role nor in
 * idempotency_settings, for idem__setting
 * returns NULL then, whoever the session user (its own first probe);
 * otherwise idem__setting, and idem__int_setting for a value that is set
 */
maxlen := CASE WHEN COALESCE(pg_catalog.current_setting('idempotency.max_key_length', true), '') OPERATOR(pg_catalog.=) ''
                    AND NOT
                        --@ role_setting_stored NAME='idempotency.max_key_length='
                    AND NOT EXISTS (SELECT FROM %SCHEMA%idempotency_settings t
                                     WHERE t.name OPERATOR(pg_catalog.=) 'idempotency.max_key_length')
                    OR COALESCE(%SCHEMA%idem__setting('idempotency.max_key_length'), '') OPERATOR(pg_catalog.=) '' THEN 255
               ELSE %SCHEMA%idem__int_setting('idempotency.max_key_length', 255, 1, 1024, 'B') END;
IF pg_catalog.octet_length(%KEY%) OPERATOR(pg_catalog.=) 0
   OR pg_catalog.octet_length(%KEY%) OPERATOR(pg_catalog.>) maxlen
   OR pg_catalog.octet_length(%SCOPE%) OPERATOR(pg_catalog.>) maxlen
   OR %KEY% OPERATOR(pg_catalog.~) E'[\\x01-\\x1f\\x7f]'
   OR %SCOPE% OPERATOR(pg_catalog.~) E'[\\x01-\\x1f\\x7f]' THEN
    PERFORM %SCHEMA%idem__check_key(%KEY%, %SCOPE%);
END IF;
