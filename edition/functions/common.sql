/*
 * common.sql: internal helpers shared by the SQL edition's functions.  None
 * is part of the contract (the C build has none of them); their names start
 * with "idem__".  PUBLIC may call none; idempotency_app may call each, since
 * the key functions run as their caller and call them.  Contracts:
 *
 * idem__check_key(key text, scope text) RETURNS void
 *     The checks of the C build's IdemGetKeyArgs, in its order, with its
 *     SQLSTATEs, messages, details and hints: key NULL (22004), scope NULL
 *     (22004, detail naming the key, hint), key empty (22023), key or scope
 *     longer than idempotency.max_key_length bytes (22023), a control byte
 *     (< 0x20 or 0x7f) in either (22023, detail: the byte's position, hex).
 *     Linear in the input's length.
 *
 * idem__setting(name text) RETURNS text
 *     The value of setting name (a lower-case idempotency.* name) that the
 *     edition honours, NULL for none (the caller's default).  How each of
 *     the C build's settings is honoured:
 *       - idempotency.lease, .retention, .max_attempts, .await_result
 *         (PGC_USERSET in the C build: any role may SET them): as the
 *         session has it, current_setting(name, true), wherever it came
 *         from (SET, SET LOCAL, a function's SET clause, ALTER ROLE/DATABASE
 *         SET, the server's configuration).
 *       - idempotency.stale_policy and .max_key_length (PGC_SUSET in the C
 *         build: only a superuser may SET them, a tenant cannot turn hold
 *         into reclaim for itself).  Without the library they are
 *         placeholders any role may SET in its session, and neither
 *         current_setting nor pg_settings (which lists no placeholder) can
 *         tell who set a value.  So: when the session user (session_user,
 *         whom no non-superuser can change) is a superuser, or (PostgreSQL
 *         15 on) was granted SET on the parameter (GRANT SET ON PARAMETER,
 *         with which the C build lets it SET the setting too), as the
 *         session has it (current_setting: every value in such a session
 *         was set by a role allowed to or by what one ran); otherwise the
 *         session's value is ignored and only pg_catalog.pg_db_role_setting is read,
 *         where PostgreSQL lets only a superuser (or a role granted SET on
 *         the parameter, PostgreSQL 15 on) store a placeholder's value:
 *         ALTER ROLE <session user> IN DATABASE <this> SET, then ALTER
 *         ROLE <session user> SET, then ALTER DATABASE <this> SET, then
 *         ALTER ROLE ALL SET, PostgreSQL's own precedence; then (either
 *         way, when that gave nothing) the edition's table
 *         idempotency_settings, which its owner writes where no role it
 *         has may store a placeholder's value (a managed service); none:
 *         the C build's default.  Read at each call, so a change applies to
 *         sessions already open (PostgreSQL applies these at connection).
 *         The server's configuration file and ALTER SYSTEM are not read
 *         for these two (pg_file_settings is for superusers only).
 *       - idempotency.stats_max_databases (PGC_POSTMASTER) and
 *         idempotency.worker_* (PGC_SIGHUP): not read by the edition (no
 *         shared memory counters, no background worker).
 * idem__int_setting(name text, dflt integer, lo integer, hi integer, unit text) RETURNS integer
 *     An integer setting as the C build's DefineCustomIntVariable would hold
 *     it: idem__setting(name), dflt when NULL or ''; a number with
 *     an optional unit of PostgreSQL's (unit 's': us ms s min h d; 'ms': the
 *     same; 'B': B kB MB GB TB; '': none), converted into unit and rounded as
 *     PostgreSQL rounds; a value it cannot read or out of [lo, hi] raises
 *     22023 as SET would have under the C build (the edition cannot refuse
 *     the SET itself: without the library the setting is a placeholder).
 * idem__int_value(name text, raw text, dflt integer, lo integer, hi integer, unit text) RETURNS integer
 *     idem__int_setting's reading of raw, a value of setting name already
 *     read (idem__int_setting(...) = idem__int_value(name, idem__setting(name), ...));
 *     the readers of the settings any role may SET pass current_setting's.
 * idem__lease() / idem__retention() RETURNS interval
 *     idempotency.lease (60 s) / idempotency.retention (86400 s), 1..INT_MAX s.
 * idem__max_key_length() RETURNS integer   idempotency.max_key_length, 255, 1..1024.
 * idem__max_attempts() RETURNS integer     idempotency.max_attempts, 0 (no limit), 0..INT_MAX.
 * idem__await_result() RETURNS interval    idempotency.await_result, 0 ms, 0..3600000 ms;
 *                                          NULL when 0 (as the C build's IdemAwaitDefault).
 * idem__stale_reclaim() RETURNS boolean    idempotency.stale_policy: true for
 *     'reclaim' (the default), false for 'hold' (case-insensitive, as enum
 *     settings are), read by idem__setting; anything else raises 22023
 *     (the C build refuses such a value when it is SET; a value stored
 *     while the library was not loaded it warns about and ignores: the
 *     edition refuses to guess, a misspelt hold must not act as reclaim).
 *
 * idem__check_interval(iv interval, what text, since timestamptz, key text, scope text) RETURNS void
 *     The C build's IdemCheckInterval: 22023 "<what> is too long" past a
 *     century (each component bounded first), 22023 "<what> must be a
 *     positive interval" when since + iv <= since.
 *
 * idem__check_row_security() RETURNS void
 *     IK006 "row level security of idempotency_keys is not in place" when
 *     idempotency_row_security records policies and idempotency_keys has
 *     row level security off, or lacks one of them; IK006 "row level
 *     security of idempotency_keys is not recorded" when its row level
 *     security is on and one of its policies is not recorded, or differs
 *     from the one recorded (the C build's CheckRowSecurityInPlace).  Every
 *     key function calls it first, where row_security_in_use says there is
 *     something to check.
 *
 * idem__row_security_now(keys regclass) RETURNS SETOF idempotency_row_security
 *     The policies of keys as idem_save_row_security() records them: the
 *     expressions as pg_get_expr writes them with only pg_catalog on the
 *     path and the settings that change how it writes a constant or a name
 *     pinned (the function's SET clauses, the C build's deparse_settings).
 *
 * idem__key_lock_secret(scope text) RETURNS bytea   SECURITY DEFINER
 *     The scope's key-lock key: sha256(secret || length(scope) || scope),
 *     where secret is the database's random 32 bytes in
 *     idempotency_key_lock_secret (no role but the owner may read it).
 *     When idempotency_keys has row level security enabled it answers only
 *     inside a transaction that has inserted, and not yet removed, the
 *     scope's probe row (key E'\x01lock ' || pg_current_xact_id()), which
 *     only a caller whose policies let it INSERT into the scope can write
 *     (idem__lock_key does that in a subtransaction it rolls back); else
 *     42501.  So a tenant cannot compute another scope's key lock ids.
 *
 * idem__key_lock_id(scope text, key text) RETURNS bigint
 *     The key's lock id: the first 8 bytes of sha256(scope's key || key), as
 *     a bigint.  Runs the probe under row level security (42501 for a scope
 *     the caller may not insert into, before any lock is touched).
 *
 * idem__lock_key(scope text, key text, wait boolean) RETURNS boolean
 *     The C build's IdemLockKey: the key's lock, a transaction-level
 *     advisory lock (pg_advisory_xact_lock(bigint): locktag field 4 = 1) on
 *     idem__key_lock_id.  A lock this transaction holds already: true at
 *     once, not counted again.  Under 64 held: wait => takes it (waits),
 *     not wait => tries it (pg_try_advisory_xact_lock: never waits).  With
 *     64 held: wait => true without taking it; not wait => only tests it
 *     (a session lock tried and let go at once).  The ids held are kept in
 *     the transaction-local setting idempotency_edition.key_locks, which a
 *     rolled-back subtransaction undoes with the locks it took.  The lock is
 *     taken in a block with an exception clause (a subtransaction of its
 *     own), so that it belongs to the (sub)transaction running the call and
 *     never to a portal's resource owner: a cursor's FETCH, or a suspended
 *     portal of the extended protocol resumed after a savepoint, runs under
 *     its portal's owner, which a savepoint rolled back does not release
 *     though it undoes the setting (test/portal_locks.pl, key_locks).
 * idem__key_locks_held() RETURNS integer   how many key locks the transaction holds.
 *
 * idem__restamp(scope text, keys text[], tokens bigint[], stamped timestamptz) RETURNS boolean
 *     The C build's IdemStampEnd for a call that wrote rows (keys with
 *     tokens, all in one scope) with times counted from stamped
 *     (clock_timestamp() taken after its last lock or wait before the
 *     write): when more than 10 ms have passed since then (the call may
 *     have waited after it), moves each row's locked_until, expires_at and
 *     due_at forward by the time since its own updated_at and sets
 *     updated_at (and created_at where it equalled updated_at) to now, as
 *     IDEM_STMT_RESTAMP does (its rows joined with the pairs of keys and
 *     tokens: a generic plan of token = ANY (tokens) read the array from
 *     its start for every row, 10,000 keys in 0.5 s, where the C build
 *     plans the statement for each run's arrays, which PostgreSQL then
 *     looks up in a hash table); returns whether it did.  The call's last
 *     statement on the table.  (The C build counts only time asleep; the
 *     edition counts wall-clock time, so a call that was merely slow moves
 *     its rows too: the same times, one write more.)
 */

CREATE FUNCTION idem__setting(name text) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $idem__setting$
DECLARE
    v text;
    probe text;
BEGIN
    IF name NOT IN ('idempotency.stale_policy', 'idempotency.max_key_length') THEN
        RETURN pg_catalog.current_setting(name, true);
    END IF;
    IF pg_catalog.current_setting('server_version_num')::integer OPERATOR(pg_catalog.>=) 150000 THEN
        /* (a statement of its own: before 15 the function does not exist) */
        IF pg_catalog.has_parameter_privilege(pg_catalog.session_user(), name, 'SET') THEN
            v := pg_catalog.current_setting(name, true);
        END IF;
    ELSIF (SELECT r.rolsuper FROM pg_catalog.pg_roles r
            WHERE r.rolname OPERATOR(pg_catalog.=) pg_catalog.session_user()) THEN
        v := pg_catalog.current_setting(name, true);
    END IF;
    IF COALESCE(v, '') OPERATOR(pg_catalog.<>) '' THEN
        RETURN v;
    END IF;
    /*
     * Whether pg_db_role_setting may hold a value for this session: the text
     * of the rows for all roles or the session user only
     * (role_setting_stored), half the cost of the query below.  Every value
     * the query can find is an element starting with name=, whose text is
     * in the array's (quoted or not), so this never misses one.
     */
    v := NULL;
    probe := name OPERATOR(pg_catalog.||) '=';
    IF
       --@ role_setting_stored NAME=probe
       THEN
        SELECT pg_catalog.substr(c, pg_catalog.length(name) OPERATOR(pg_catalog.+) 2) INTO v
          FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) AS c
         WHERE (s.setdatabase OPERATOR(pg_catalog.=) 0
                OR s.setdatabase OPERATOR(pg_catalog.=)
                   (SELECT d.oid FROM pg_catalog.pg_database d
                     WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()))
           AND (s.setrole OPERATOR(pg_catalog.=) 0
                OR s.setrole OPERATOR(pg_catalog.=)
                   (SELECT r.oid FROM pg_catalog.pg_roles r
                     WHERE r.rolname OPERATOR(pg_catalog.=) pg_catalog.session_user()))
           AND pg_catalog.starts_with(pg_catalog.lower(c), name OPERATOR(pg_catalog.||) '=')
         /* role in database, role, database, all roles: PostgreSQL's order */
         ORDER BY s.setrole OPERATOR(pg_catalog.=) 0, s.setdatabase OPERATOR(pg_catalog.=) 0
         LIMIT 1;
    END IF;
    IF v IS NULL THEN
        /* then the edition's own table: a database's value its owner could store */
        SELECT t.value INTO v FROM idempotency_settings t WHERE t.name OPERATOR(pg_catalog.=) idem__setting.name;
    END IF;
    RETURN v;
END
$idem__setting$;

CREATE FUNCTION idem__int_setting(name text, dflt integer, lo integer, hi integer, unit text)
RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $idem__int_setting$
BEGIN
    RETURN idem__int_value(name, idem__setting(name), dflt, lo, hi, unit);
END
$idem__int_setting$;

CREATE FUNCTION idem__int_value(name text, raw text, dflt integer, lo integer, hi integer, unit text)
RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $idem__int_value$
DECLARE
    m text[];
    num numeric;
    r numeric;
    factor numeric;
    next_factor numeric;
    units text;
    rest text;
    digits text;
    v numeric;
    use_strtod boolean := false;
    i integer;
BEGIN
    IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
        RETURN dflt;
    END IF;
    /*
     * Digits and a unit of PostgreSQL's, as SHOW prints the C build's
     * settings ('1min', '255B', '0'), in a few steps without a regular
     * expression: the value the steps below would find for it (no leading
     * 0, which strtol reads as octal; a whole number of a unit is a whole
     * number of the next smaller one); anything else, or a value out of
     * range, goes through them.
     */
    units := pg_catalog.ltrim(raw, '0123456789');
    IF units OPERATOR(pg_catalog.<>) raw
       AND pg_catalog.length(raw) OPERATOR(pg_catalog.<=) 13
       AND (pg_catalog.left(raw, 1) OPERATOR(pg_catalog.<>) '0' OR raw OPERATOR(pg_catalog.=) '0')
       AND units IN ('', 'us', 'ms', 's', 'min', 'h', 'd', 'B', 'kB', 'MB', 'GB', 'TB') THEN
        factor := CASE WHEN units OPERATOR(pg_catalog.=) '' THEN 1
                       WHEN unit OPERATOR(pg_catalog.=) 's' OR unit OPERATOR(pg_catalog.=) 'ms' THEN
                           CASE units WHEN 'us' THEN 0.000001 WHEN 'ms' THEN 0.001 WHEN 's' THEN 1
                                      WHEN 'min' THEN 60 WHEN 'h' THEN 3600 WHEN 'd' THEN 86400 END
                           OPERATOR(pg_catalog.*) CASE WHEN unit OPERATOR(pg_catalog.=) 'ms' THEN 1000 ELSE 1 END
                       WHEN unit OPERATOR(pg_catalog.=) 'B' THEN
                           CASE units WHEN 'B' THEN 1 WHEN 'kB' THEN 1024 WHEN 'MB' THEN 1048576
                                      WHEN 'GB' THEN 1073741824 WHEN 'TB' THEN 1099511627776 END END;
        IF factor IS NOT NULL THEN
            num := pg_catalog.left(raw, pg_catalog.length(raw) OPERATOR(pg_catalog.-) pg_catalog.length(units))::numeric
                   OPERATOR(pg_catalog.*) factor;
            v := pg_catalog.round(num);
            IF v OPERATOR(pg_catalog.>=) lo AND v OPERATOR(pg_catalog.<=) hi
               AND pg_catalog.abs(v OPERATOR(pg_catalog.-) num) OPERATOR(pg_catalog.<>) 0.5 THEN
                RETURN v::integer;
            END IF;
        END IF;
    END IF;
    /*
     * guc.c's parse_int, step by step: strtol(raw, 0) (leading white space,
     * a sign, 0x hex, 0 octal, else decimal); strtod instead when a '.',
     * 'e' or 'E' follows its digits, when they overflow a long, or when raw
     * starts with '.'; then white space, then a unit (at most 3 characters,
     * white space after it and nothing else), the value rounded to a whole
     * number of the next smaller unit (convert_to_base_unit), then rint.
     */
    m := pg_catalog.regexp_match(raw, E'^[ \\t\\n\\v\\f\\r]*([-+]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)(.*)$');
    IF m IS NULL THEN
        use_strtod := pg_catalog.left(raw, 1) OPERATOR(pg_catalog.=) '.';
        IF NOT use_strtod THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = pg_catalog.format('invalid value for parameter "%s": "%s"', name, raw);
        END IF;
    ELSIF pg_catalog.left(m[3], 1) IN ('.', 'e', 'E') OR pg_catalog.length(m[2]) OPERATOR(pg_catalog.>) 24 THEN
        use_strtod := true;
    ELSE
        digits := m[2];
        rest := m[3];
        num := 0;
        IF pg_catalog.lower(pg_catalog.left(digits, 2)) OPERATOR(pg_catalog.=) '0x' THEN
            FOR i IN 3 .. pg_catalog.length(digits) LOOP
                num := num OPERATOR(pg_catalog.*) 16 OPERATOR(pg_catalog.+)
                       (pg_catalog.strpos('0123456789abcdef', pg_catalog.lower(pg_catalog.substr(digits, i, 1))) OPERATOR(pg_catalog.-) 1);
            END LOOP;
        ELSIF pg_catalog.left(digits, 1) OPERATOR(pg_catalog.=) '0' THEN
            FOR i IN 2 .. pg_catalog.length(digits) LOOP
                num := num OPERATOR(pg_catalog.*) 8 OPERATOR(pg_catalog.+) pg_catalog.substr(digits, i, 1)::integer;
            END LOOP;
        ELSE
            num := digits::numeric;
        END IF;
        IF num OPERATOR(pg_catalog.>) 9223372036854775807 THEN
            use_strtod := true;			/* strtol's ERANGE */
        ELSIF m[1] OPERATOR(pg_catalog.=) '-' THEN
            num := OPERATOR(pg_catalog.-) num;
        END IF;
    END IF;
    IF use_strtod THEN
        m := pg_catalog.regexp_match(raw, E'^[ \\t\\n\\v\\f\\r]*([-+]?(?:[0-9]+\\.?[0-9]*|\\.[0-9]+)(?:[eE][-+]?[0-9]+)?)(.*)$');
        IF m IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = pg_catalog.format('invalid value for parameter "%s": "%s"', name, raw);
        END IF;
        rest := m[2];
        /* beyond a double (1e400, 1e-400, 1e1000000): strtod's ERANGE, no hint */
        BEGIN
            /* (digits past the 40th after the point change no double) */
            num := pg_catalog.regexp_replace(m[1], E'(\\.[0-9]{40})[0-9]+', E'\\1')::numeric;
        EXCEPTION WHEN numeric_value_out_of_range THEN
            num := NULL;
        END;
        IF num IS NULL
           OR pg_catalog.abs(num) OPERATOR(pg_catalog.>) 1.7976931348623157e308
           OR (num OPERATOR(pg_catalog.<>) 0 AND pg_catalog.abs(num) OPERATOR(pg_catalog.<) 2.2250738585072014e-308) THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = pg_catalog.format('invalid value for parameter "%s": "%s"', name, raw);
        END IF;
    END IF;
    rest := pg_catalog.ltrim(rest, E' \t\n\x0b\f\r');
    IF rest OPERATOR(pg_catalog.<>) '' THEN
        IF unit OPERATOR(pg_catalog.=) '' THEN
            /* a setting without units: no hint */
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = pg_catalog.format('invalid value for parameter "%s": "%s"', name, raw);
        END IF;
        units := (pg_catalog.regexp_match(rest, E'^[^ \\t\\n\\v\\f\\r]{1,3}'))[1];
        factor := NULL;
        IF pg_catalog.ltrim(pg_catalog.substr(rest, pg_catalog.length(units) OPERATOR(pg_catalog.+) 1), E' \t\n\x0b\f\r') OPERATOR(pg_catalog.=) '' THEN
            IF unit OPERATOR(pg_catalog.=) 'B' THEN
                factor := CASE units WHEN 'TB' THEN 1099511627776 WHEN 'GB' THEN 1073741824 WHEN 'MB' THEN 1048576
                                     WHEN 'kB' THEN 1024 WHEN 'B' THEN 1 END;
                next_factor := CASE units WHEN 'TB' THEN 1073741824 WHEN 'GB' THEN 1048576 WHEN 'MB' THEN 1024
                                          WHEN 'kB' THEN 1 END;
            ELSE
                factor := CASE units WHEN 'd' THEN 86400 WHEN 'h' THEN 3600 WHEN 'min' THEN 60 WHEN 's' THEN 1
                                     WHEN 'ms' THEN 0.001 WHEN 'us' THEN 0.000001 END;
                next_factor := CASE units WHEN 'd' THEN 3600 WHEN 'h' THEN 60 WHEN 'min' THEN 1 WHEN 's' THEN 0.001
                                          WHEN 'ms' THEN 0.000001 END;
                IF unit OPERATOR(pg_catalog.=) 'ms' THEN
                    factor := factor OPERATOR(pg_catalog.*) 1000;
                    next_factor := next_factor OPERATOR(pg_catalog.*) 1000;
                END IF;
            END IF;
        END IF;
        IF factor IS NULL THEN
            /* a unit this setting does not take, or more after it */
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = pg_catalog.format('invalid value for parameter "%s": "%s"', name, raw),
                HINT = CASE WHEN unit OPERATOR(pg_catalog.=) 'B' THEN 'Valid units for this parameter are "B", "kB", "MB", "GB", and "TB".'
                            ELSE 'Valid units for this parameter are "us", "ms", "s", "min", "h", and "d".' END;
        END IF;
        num := num OPERATOR(pg_catalog.*) factor;
        IF next_factor IS NOT NULL THEN
            /* "30.1GB": to the nearest whole number of the next smaller unit (rint) */
            r := num OPERATOR(pg_catalog./) next_factor;
            v := pg_catalog.round(r);
            IF pg_catalog.abs(v OPERATOR(pg_catalog.-) r) OPERATOR(pg_catalog.=) 0.5
               AND pg_catalog.mod(v, 2) OPERATOR(pg_catalog.<>) 0 THEN
                v := v OPERATOR(pg_catalog.-) pg_catalog.sign(v OPERATOR(pg_catalog.-) r);
            END IF;
            num := v OPERATOR(pg_catalog.*) next_factor;
        END IF;
    END IF;
    v := pg_catalog.round(num);
    /* parse_int rounds with rint(): a half to the even neighbour */
    IF pg_catalog.abs(v OPERATOR(pg_catalog.-) num) OPERATOR(pg_catalog.=) 0.5
       AND pg_catalog.mod(v, 2) OPERATOR(pg_catalog.<>) 0 THEN
        v := v OPERATOR(pg_catalog.-) pg_catalog.sign(v OPERATOR(pg_catalog.-) num);
    END IF;
    IF v OPERATOR(pg_catalog.<) -2147483648 OR v OPERATOR(pg_catalog.>) 2147483647 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('invalid value for parameter "%s": "%s"', name, raw),
            HINT = 'Value exceeds integer range.';
    END IF;
    IF v OPERATOR(pg_catalog.<) lo OR v OPERATOR(pg_catalog.>) hi THEN
        /* 16 and later print the bounds with the unit too */
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('%s%s is outside the valid range for parameter "%s" (%s%s .. %s%s)',
                                        v, CASE WHEN unit OPERATOR(pg_catalog.=) '' THEN '' ELSE ' ' OPERATOR(pg_catalog.||) unit END,
                                        name,
                                        lo, CASE WHEN unit OPERATOR(pg_catalog.=) '' OR pg_catalog.current_setting('server_version_num')::integer OPERATOR(pg_catalog.<) 160000
                                                 THEN '' ELSE ' ' OPERATOR(pg_catalog.||) unit END,
                                        hi, CASE WHEN unit OPERATOR(pg_catalog.=) '' OR pg_catalog.current_setting('server_version_num')::integer OPERATOR(pg_catalog.<) 160000
                                                 THEN '' ELSE ' ' OPERATOR(pg_catalog.||) unit END);
    END IF;
    RETURN v::integer;
END
$idem__int_value$;

/*
 * The settings' readers: PL/pgSQL, not SQL (PostgreSQL before 18 parses and
 * plans a SQL function with a SET clause again in each transaction; a
 * PL/pgSQL function keeps its plans), and for the settings any role may SET
 * (idem__setting returns the session's value for them) a value not set at
 * all is the default at once, without idem__int_setting.
 */
CREATE FUNCTION idem__lease() RETURNS interval
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $idem__lease$
DECLARE
    raw text := pg_catalog.current_setting('idempotency.lease', true);
BEGIN
    IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
        RETURN pg_catalog.make_interval(secs => 60);
    END IF;
    RETURN pg_catalog.make_interval(secs => idem__int_value('idempotency.lease', raw, 60, 1, 2147483647, 's'));
END
$idem__lease$;

CREATE FUNCTION idem__retention() RETURNS interval
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $idem__retention$
DECLARE
    raw text := pg_catalog.current_setting('idempotency.retention', true);
BEGIN
    IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
        RETURN pg_catalog.make_interval(secs => 86400);
    END IF;
    RETURN pg_catalog.make_interval(secs => idem__int_value('idempotency.retention', raw, 86400, 1, 2147483647, 's'));
END
$idem__retention$;

CREATE FUNCTION idem__max_key_length() RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $idem__max_key_length$
BEGIN
    RETURN idem__int_setting('idempotency.max_key_length', 255, 1, 1024, 'B');
END
$idem__max_key_length$;

CREATE FUNCTION idem__max_attempts() RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $idem__max_attempts$
DECLARE
    raw text := pg_catalog.current_setting('idempotency.max_attempts', true);
BEGIN
    IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
        RETURN 0;
    END IF;
    RETURN idem__int_value('idempotency.max_attempts', raw, 0, 0, 2147483647, '');
END
$idem__max_attempts$;

CREATE FUNCTION idem__await_result() RETURNS interval
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $idem__await_result$
DECLARE
    raw text := pg_catalog.current_setting('idempotency.await_result', true);
    ms integer;
BEGIN
    IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
        RETURN NULL;
    END IF;
    ms := idem__int_value('idempotency.await_result', raw, 0, 0, 3600000, 'ms');
    RETURN CASE WHEN ms OPERATOR(pg_catalog.=) 0 THEN NULL
                ELSE pg_catalog.make_interval(secs => ms OPERATOR(pg_catalog./) 1000.0) END;
END
$idem__await_result$;

CREATE FUNCTION idem__stale_reclaim() RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $idem__stale_reclaim$
DECLARE
    raw text := idem__setting('idempotency.stale_policy');
BEGIN
    IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' OR pg_catalog.lower(raw) OPERATOR(pg_catalog.=) 'reclaim' THEN
        RETURN true;
    ELSIF pg_catalog.lower(raw) OPERATOR(pg_catalog.=) 'hold' THEN
        RETURN false;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = pg_catalog.format('invalid value for parameter "%s": "%s"', 'idempotency.stale_policy', raw),
        HINT = 'Available values: reclaim, hold.';
END
$idem__stale_reclaim$;

CREATE FUNCTION idem__check_key(key text, scope text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $idem__check_key$
DECLARE
    maxlen integer;
    what text;
    v text;
    b bytea;
    len integer;
    pos integer;
BEGIN
    IF key IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'idempotency key must not be null';
    END IF;
    IF scope IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'idempotency scope must not be null',
            DETAIL = pg_catalog.format('Key "%s".', key),
            HINT = 'The default scope is the empty string.';
    END IF;
    maxlen := idem__max_key_length();
    FOREACH what IN ARRAY ARRAY['key', 'scope'] LOOP
        v := CASE WHEN what OPERATOR(pg_catalog.=) 'key' THEN key ELSE scope END;
        len := pg_catalog.octet_length(v);
        IF what OPERATOR(pg_catalog.=) 'key' AND len OPERATOR(pg_catalog.=) 0 THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'idempotency key must not be empty';
        END IF;
        IF len OPERATOR(pg_catalog.>) maxlen THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = pg_catalog.format('idempotency %s is too long', what),
                DETAIL = pg_catalog.format('The %s is %s bytes; idempotency.max_key_length is %s.', what, len, maxlen);
        END IF;
        /* a control character is one byte in every server encoding */
        IF v OPERATOR(pg_catalog.~) E'[\\x01-\\x1f\\x7f]' THEN
            b := pg_catalog.convert_to(v, pg_catalog.getdatabaseencoding());
            pos := 0;
            WHILE pos OPERATOR(pg_catalog.<) len LOOP
                EXIT WHEN pg_catalog.get_byte(b, pos) OPERATOR(pg_catalog.<) 32
                       OR pg_catalog.get_byte(b, pos) OPERATOR(pg_catalog.=) 127;
                pos := pos OPERATOR(pg_catalog.+) 1;
            END LOOP;
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = pg_catalog.format('idempotency %s must not contain control characters', what),
                DETAIL = pg_catalog.format('Byte %s of the %s is 0x%s.', pos OPERATOR(pg_catalog.+) 1, what,
                                           pg_catalog.lpad(pg_catalog.to_hex(pg_catalog.get_byte(b, pos)), 2, '0'));
        END IF;
    END LOOP;
END
$idem__check_key$;

CREATE FUNCTION idem__check_interval(iv interval, what text, since timestamptz, key text, scope text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $idem__check_interval$
DECLARE
    months numeric := EXTRACT(year FROM iv) OPERATOR(pg_catalog.*) 12
                      OPERATOR(pg_catalog.+) EXTRACT(month FROM iv);
    days numeric := EXTRACT(day FROM iv);
    secs numeric;
    max_secs numeric := 3155760000;
    too_long boolean;
    stop timestamptz;
BEGIN
    secs := EXTRACT(epoch FROM iv OPERATOR(pg_catalog.-)
                pg_catalog.make_interval(months => months::integer, days => days::integer));
    too_long := pg_catalog.abs(months) OPERATOR(pg_catalog.>) 1304  /* 36525 / 28 */
             OR pg_catalog.abs(days) OPERATOR(pg_catalog.>) 36525
             OR pg_catalog.abs(secs) OPERATOR(pg_catalog.>) max_secs;
    IF NOT too_long THEN
        stop := since OPERATOR(pg_catalog.+) iv;
        too_long := EXTRACT(epoch FROM stop OPERATOR(pg_catalog.-) since) OPERATOR(pg_catalog.>) max_secs;
    END IF;
    IF too_long THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('%s is too long', what),
            DETAIL = pg_catalog.format('The %s given for key "%s" in scope "%s" is %s; the longest is 100 years.',
                                       what, key, scope, iv);
    END IF;
    IF stop OPERATOR(pg_catalog.<=) since THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('%s must be a positive interval', what),
            DETAIL = pg_catalog.format('The %s given for key "%s" in scope "%s" is %s.', what, key, scope, iv),
            HINT = 'It is added to the current time, months as the calendar counts them.';
    END IF;
END
$idem__check_interval$;

CREATE FUNCTION idem__row_security_now(keys pg_catalog.regclass)
RETURNS SETOF idempotency_row_security
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
SET quote_all_identifiers = off
SET standard_conforming_strings = on
SET DateStyle = 'ISO, MDY'
SET IntervalStyle = postgres
SET TimeZone = 'UTC'
SET extra_float_digits = 1
SET bytea_output = hex
SET lc_monetary = 'C'
AS $idem__row_security_now$
SELECT p.polname, p.polpermissive,
       CASE WHEN p.polcmd OPERATOR(pg_catalog.=) 'r' THEN 'SELECT'
            WHEN p.polcmd OPERATOR(pg_catalog.=) 'a' THEN 'INSERT'
            WHEN p.polcmd OPERATOR(pg_catalog.=) 'w' THEN 'UPDATE'
            WHEN p.polcmd OPERATOR(pg_catalog.=) 'd' THEN 'DELETE' ELSE 'ALL' END,
       ARRAY(SELECT CASE WHEN r OPERATOR(pg_catalog.=) 0 THEN 'public'::pg_catalog.name ELSE a.rolname END
               FROM pg_catalog.unnest(p.polroles) AS r
               LEFT JOIN pg_catalog.pg_roles a ON a.oid OPERATOR(pg_catalog.=) r),
       pg_catalog.pg_get_expr(p.polqual, p.polrelid), pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid)
  FROM pg_catalog.pg_policy p
 WHERE p.polrelid OPERATOR(pg_catalog.=) keys
$idem__row_security_now$;

CREATE FUNCTION idem__check_row_security() RETURNS void
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $idem__check_row_security$
DECLARE
    d record;
    seen text;
BEGIN
    IF NOT (SELECT c.relrowsecurity FROM pg_catalog.pg_class c
             WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency_keys'::pg_catalog.regclass) THEN
        IF EXISTS (SELECT FROM idempotency_row_security) THEN
            RAISE EXCEPTION USING ERRCODE = 'IK006',
                MESSAGE = 'row level security of idempotency_keys is not in place',
                DETAIL = 'Policies are recorded in idempotency_row_security, but row level security is disabled on idempotency_keys.',
                HINT = 'As the table''s owner, run SELECT idem_restore_row_security(); or, to run without the policies, delete their rows from idempotency_row_security.';
        END IF;
        RETURN;
    END IF;
    /*
     * The row versions of the table's policies and of the recorded rows:
     * when they are those this session last found alike, they still are
     * (idem__row_security_now costs a call with SET clauses and a
     * pg_get_expr a policy, half a millisecond).  A role renamed since
     * changes neither: a session's first call sees it, as the C build's
     * do.  The caller may set the setting itself, and so skip the
     * comparison for its own calls only (it guards against the owner's
     * mistake; the policies themselves are PostgreSQL's to enforce).
     */
    seen := (SELECT 'idempotency_keys'::pg_catalog.regclass::pg_catalog.oid::pg_catalog.text
                    OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||)
                    COALESCE(pg_catalog.string_agg(p.oid::pg_catalog.text OPERATOR(pg_catalog.||) '.'
                                                   OPERATOR(pg_catalog.||) p.xmin::pg_catalog.text, ',' ORDER BY p.oid), '')
               FROM pg_catalog.pg_policy p
              WHERE p.polrelid OPERATOR(pg_catalog.=) 'idempotency_keys'::pg_catalog.regclass)
            OPERATOR(pg_catalog.||) '|' OPERATOR(pg_catalog.||)
            (SELECT COALESCE(pg_catalog.string_agg(r.xmin::pg_catalog.text, ',' ORDER BY r.policy), '')
               FROM idempotency_row_security r);
    IF seen OPERATOR(pg_catalog.=) pg_catalog.current_setting('idempotency_edition.row_security_seen', true) THEN
        RETURN;
    END IF;
    /* each policy recorded or on the table that is not both, alike; a missing one first */
    SELECT COALESCE(s.policy, n.policy) AS policy, n.policy IS NULL AS missing, s.policy IS NULL AS unrecorded
      INTO d
      FROM idempotency_row_security s
      FULL JOIN idem__row_security_now('idempotency_keys'::pg_catalog.regclass) n
        ON s.policy OPERATOR(pg_catalog.=) n.policy
     WHERE s.policy IS NULL OR n.policy IS NULL
        OR s.permissive OPERATOR(pg_catalog.<>) n.permissive OR s.command OPERATOR(pg_catalog.<>) n.command
        OR s.roles OPERATOR(pg_catalog.<>) n.roles
        OR NOT COALESCE(s.using_expr OPERATOR(pg_catalog.=) n.using_expr, s.using_expr IS NULL AND n.using_expr IS NULL)
        OR NOT COALESCE(s.check_expr OPERATOR(pg_catalog.=) n.check_expr, s.check_expr IS NULL AND n.check_expr IS NULL)
     ORDER BY n.policy IS NULL DESC, 1
     LIMIT 1;
    IF NOT FOUND THEN
        PERFORM pg_catalog.set_config('idempotency_edition.row_security_seen', seen, false);
        RETURN;
    END IF;
    IF d.missing THEN
        RAISE EXCEPTION USING ERRCODE = 'IK006',
            MESSAGE = 'row level security of idempotency_keys is not in place',
            DETAIL = pg_catalog.format('Policy "%s" is recorded in idempotency_row_security but missing from idempotency_keys.', d.policy),
            HINT = 'As the table''s owner, run SELECT idem_restore_row_security(); or, to run without the policies, delete their rows from idempotency_row_security.';
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'IK006',
        MESSAGE = 'row level security of idempotency_keys is not recorded',
        DETAIL = CASE WHEN d.unrecorded
                      THEN pg_catalog.format('Policy "%s" of idempotency_keys is not recorded in idempotency_row_security, so pg_dump would not keep it.', d.policy)
                      ELSE pg_catalog.format('Policy "%s" of idempotency_keys differs from the one recorded in idempotency_row_security, so a restore would bring back the recorded one.', d.policy) END,
        HINT = 'As the table''s owner, run SELECT idem_save_row_security(); after every change of the policies, in the same transaction.';
END
$idem__check_row_security$;

CREATE FUNCTION idem__key_lock_secret(scope text) RETURNS bytea
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path FROM CURRENT
AS $idem__key_lock_secret$
DECLARE
    s bytea;
BEGIN
    IF scope IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'idempotency scope must not be null';
    END IF;
    /*
     * Under row level security, only for a scope the caller just proved it
     * may insert into: its probe row's trigger (idem__key_lock_proved)
     * wrote the proof, as the owner, into a table no one else can write.
     * Not the probe row itself: under FORCE ROW LEVEL SECURITY the owner,
     * whom this function runs as, may not see it.
     */
    IF (SELECT c.relrowsecurity FROM pg_catalog.pg_class c
         WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency_keys'::pg_catalog.regclass)
       AND NOT EXISTS (SELECT FROM idempotency_key_lock_proof p
                        WHERE p.xid OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id()
                          AND p.scope OPERATOR(pg_catalog.=) idem__key_lock_secret.scope) THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = 'permission denied for the key locks of this scope',
            HINT = 'Key locks are taken by the key functions.';
    END IF;
    SELECT t.secret INTO STRICT s FROM idempotency_key_lock_secret t;
    RETURN pg_catalog.sha256(s OPERATOR(pg_catalog.||)
                             pg_catalog.int4send(pg_catalog.octet_length(scope)) OPERATOR(pg_catalog.||)
                             pg_catalog.convert_to(scope, pg_catalog.getdatabaseencoding()));
END
$idem__key_lock_secret$;

/*
 * The trigger of a key-lock probe row (idem__key_lock_id): the row passed
 * the caller's policies, so its scope is one the caller may use; recorded
 * for idem__key_lock_secret in this (sub)transaction, rolled back with the
 * probe.  Only for the key the probe named in idempotency_edition.probe,
 * set in its subtransaction ("\x01lock ", this transaction's id and a
 * random part, so that no row written before stands in its way): any
 * other row of token 0 is a row like any other, which a restore's COPY
 * writes back too.  A tenant that sets the setting itself and writes such
 * a row proves only what its own row proved (its policies let it insert
 * into the scope), and has it refused at commit
 * (idem__key_lock_proof_kept); each probe looks for its own proof by the
 * table's index (idempotency_key_lock_proof_xid_idx).
 */
CREATE FUNCTION idem__key_lock_proved() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path FROM CURRENT
AS $idem__key_lock_proved$
BEGIN
    /* the trigger's WHEN has token 0; the probe's key too */
    /* (the setting is '' after a probe rolled back: no key then) */
    IF pg_catalog.starts_with(NEW.key, E'\x01lock ')
       AND NEW.key OPERATOR(pg_catalog.=) pg_catalog.current_setting('idempotency_edition.probe', true) THEN
        INSERT INTO idempotency_key_lock_proof (xid, scope) VALUES (pg_catalog.pg_current_xact_id(), NEW.scope);
    END IF;
    RETURN NULL;
END
$idem__key_lock_proved$;

/*
 * The constraint trigger of idempotency_key_lock_proof: a proof that
 * outlived its probe (a row of token 0 with a probe's key, written by its
 * caller as any row: a tenant may write its own rows) would stay for good,
 * and each later probe reads every proof.  The probe's own events roll back
 * with it; any other is refused at commit.
 */
CREATE FUNCTION idem__key_lock_proof_kept() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $idem__key_lock_proof_kept$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '42501',
        MESSAGE = 'a key-lock probe row cannot be committed',
        DETAIL = pg_catalog.format('A row of token 0 with a key-lock probe''s key was inserted in scope "%s": such rows are the key functions'' own, rolled back at once.', NEW.scope),
        HINT = 'Key locks are taken by the key functions.';
END
$idem__key_lock_proof_kept$;

CREATE FUNCTION idem__key_lock_id(scope text, key text) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $idem__key_lock_id$
DECLARE
    k bytea;
    probe text;
BEGIN
    IF (SELECT c.relrowsecurity FROM pg_catalog.pg_class c
         WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency_keys'::pg_catalog.regclass) THEN
        /*
         * The probe: the caller's policies must let it insert into the
         * scope (42501 otherwise, as the C build's policy check before the
         * lock), and its row proves so to idem__key_lock_secret; rolled back.
         * Whenever the table has row level security enabled, as
         * idem__key_lock_secret asks (it runs as the owner and cannot tell
         * whether the policies apply to its caller): a caller they do not
         * apply to (the owner, a superuser, BYPASSRLS) inserts it anyway.
         * Its key holds a control character, which no key function's key
         * may, and a random part: it cannot meet another writer's row (one
         * a tenant wrote itself, or a restore), so it never waits.  Its proof's check
         * (idempotency_key_lock_proof_kept) deferred here, whatever the
         * caller's SET CONSTRAINTS: it would refuse the proof at once
         * under IMMEDIATE; the subtransaction's rollback puts the caller's
         * mode back and drops the check with the proof.
         */
        BEGIN
            SET CONSTRAINTS idempotency_key_lock_proof_kept DEFERRED;
            probe := pg_catalog.set_config('idempotency_edition.probe',
                                           E'\x01lock ' OPERATOR(pg_catalog.||) pg_catalog.pg_current_xact_id()::text
                                           OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) pg_catalog.gen_random_uuid()::text,
                                           true);
            INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
            VALUES (scope, probe, 'processing', 0, pg_catalog.now(), pg_catalog.now(), pg_catalog.now());
            k := idem__key_lock_secret(scope);
            RAISE EXCEPTION USING ERRCODE = 'IKP01', MESSAGE = 'key lock probe';
        EXCEPTION WHEN SQLSTATE 'IKP01' THEN
            NULL;
        END;
    ELSE
        k := idem__key_lock_secret(scope);
    END IF;
    RETURN
        --@ key_lock_id SECRET=k KEY=key
        ;
END
$idem__key_lock_id$;

CREATE FUNCTION idem__key_locks_held() RETURNS integer
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $idem__key_locks_held$
SELECT COALESCE(pg_catalog.array_length(pg_catalog.string_to_array(
           NULLIF(pg_catalog.current_setting('idempotency_edition.key_locks', true), ''), ','), 1), 0)
$idem__key_locks_held$;

CREATE FUNCTION idem__lock_key(scope text, key text, wait boolean) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $idem__lock_key$
DECLARE
    id bigint;
    held text := COALESCE(pg_catalog.current_setting('idempotency_edition.key_locks', true), '');
    n integer;
    done text;                  /* (assignments, not PERFORM: no query) */
BEGIN
    /* idem__key_lock_id, its probe only under row level security */
    IF (SELECT c.relrowsecurity FROM pg_catalog.pg_class c
         WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency_keys'::pg_catalog.regclass) THEN
        id := idem__key_lock_id(scope, key);
    ELSE
        id :=
            --@ key_lock_id SECRET=idem__key_lock_secret(scope) KEY=key
            ;
    END IF;
    IF pg_catalog.strpos(',' OPERATOR(pg_catalog.||) held OPERATOR(pg_catalog.||) ',',
                         ',' OPERATOR(pg_catalog.||) id::text OPERATOR(pg_catalog.||) ',') OPERATOR(pg_catalog.>) 0 THEN
        RETURN true;
    END IF;
    n := CASE WHEN held OPERATOR(pg_catalog.=) '' THEN 0
              ELSE pg_catalog.array_length(pg_catalog.string_to_array(held, ','), 1) END;
    IF n OPERATOR(pg_catalog.>=) 64 THEN
        IF wait THEN
            RETURN true;
        END IF;
        /* only test it: a session lock of the same tag, let go at once */
        IF pg_catalog.pg_try_advisory_lock(id) THEN
            PERFORM pg_catalog.pg_advisory_unlock(id);
            RETURN true;
        END IF;
        RETURN false;
    END IF;
    /*
     * The lock in a block of its own (a subtransaction), so that it belongs
     * to the (sub)transaction running the call when the block ends, as the
     * setting does, and not to the portal it runs under: a cursor's FETCH,
     * or a portal of the extended protocol resumed after a savepoint, runs
     * under its portal's resource owner, which a savepoint rolled back does
     * not release though it forgets the setting.  So a rollback lets go of
     * the lock with its place in the count (the C build's IdemLockKey takes
     * it under the (sub)transaction's owner).
     */
    BEGIN
        IF wait THEN
            done := pg_catalog.pg_advisory_xact_lock(id)::text;
        ELSIF NOT pg_catalog.pg_try_advisory_xact_lock(id) THEN
            RETURN false;
        END IF;
    EXCEPTION WHEN SQLSTATE 'IKP02' THEN    /* raised by nothing: the clause makes the block a subtransaction */
        RAISE;
    END;
    done := pg_catalog.set_config('idempotency_edition.key_locks',
        CASE WHEN held OPERATOR(pg_catalog.=) '' THEN id::text
             ELSE held OPERATOR(pg_catalog.||) ',' OPERATOR(pg_catalog.||) id::text END, true);
    RETURN true;
END
$idem__lock_key$;

CREATE FUNCTION idem__restamp(scope text, keys text[], tokens bigint[], stamped timestamptz)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $idem__restamp$
DECLARE
    now_ts timestamptz := pg_catalog.clock_timestamp();
    n bigint;
BEGIN
    IF now_ts OPERATOR(pg_catalog.-) stamped OPERATOR(pg_catalog.<=) '10 ms'::interval THEN
        RETURN false;
    END IF;
    /*
     * Each time moves by the seconds since the row's write, as an interval
     * of seconds alone: the difference of two times is given in days past
     * 24 hours, and a day added in a TimeZone with daylight saving may be
     * 23 or 25 hours (the C build's SHIFTED adds seconds too).
     */
    UPDATE idempotency_keys AS k
       SET locked_until = CASE WHEN k.locked_until IN ('infinity', '-infinity') THEN k.locked_until
                               ELSE k.locked_until OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => pg_catalog.date_part('epoch', now_ts OPERATOR(pg_catalog.-) k.updated_at)) END,
           expires_at = CASE WHEN k.expires_at IN ('infinity', '-infinity') THEN k.expires_at
                             ELSE k.expires_at OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => pg_catalog.date_part('epoch', now_ts OPERATOR(pg_catalog.-) k.updated_at)) END,
           due_at = CASE WHEN k.due_at IN ('infinity', '-infinity') THEN k.due_at
                         ELSE k.due_at OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => pg_catalog.date_part('epoch', now_ts OPERATOR(pg_catalog.-) k.updated_at)) END,
           created_at = CASE WHEN k.created_at OPERATOR(pg_catalog.=) k.updated_at THEN now_ts ELSE k.created_at END,
           updated_at = now_ts
      FROM ROWS FROM (pg_catalog.unnest(keys), pg_catalog.unnest(tokens)) AS w(key, token)
     WHERE k.scope OPERATOR(pg_catalog.=) idem__restamp.scope
       AND k.key OPERATOR(pg_catalog.=) w.key
       AND k.token OPERATOR(pg_catalog.=) w.token;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n OPERATOR(pg_catalog.=) 0 THEN
        -- only row level security hides a row this transaction wrote, when
        -- what its policies read (a mapping table) changed meanwhile
        RAISE EXCEPTION USING
            ERRCODE = 'serialization_failure',
            MESSAGE = 'could not move the idempotency key rows forward after a wait',
            DETAIL = 'The rows this call wrote are no longer visible to it: what the table''s row level security policies read changed meanwhile.',
            HINT = 'Retry the transaction.';
    END IF;
    RETURN true;
END
$idem__restamp$;

REVOKE ALL ON FUNCTION idem__setting(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__int_setting(text, integer, integer, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__int_value(text, text, integer, integer, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__lease() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__retention() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__max_key_length() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__max_attempts() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__await_result() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__stale_reclaim() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__check_key(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__check_interval(interval, text, timestamptz, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__check_row_security() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__row_security_now(pg_catalog.regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__key_lock_secret(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__key_lock_proved() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__key_lock_proof_kept() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__key_lock_id(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__key_locks_held() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__lock_key(text, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem__restamp(text, text[], bigint[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem__setting(text) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__int_setting(text, integer, integer, integer, text) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__int_value(text, text, integer, integer, integer, text) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__lease() TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__retention() TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__max_key_length() TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__max_attempts() TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__await_result() TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__stale_reclaim() TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__check_key(text, text) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__check_interval(interval, text, timestamptz, text, text) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__check_row_security() TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__row_security_now(pg_catalog.regclass) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__key_lock_secret(text) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__key_lock_id(text, text) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__key_locks_held() TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__lock_key(text, text, boolean) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem__restamp(text, text[], bigint[], timestamptz) TO idempotency_app;
