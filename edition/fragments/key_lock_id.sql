-- key_lock_id (edition/build.sh expands "--@ key_lock_id SECRET=.. KEY=.."):
-- the key's lock id, an expression: the first 64 bits of
-- SHA-256(SECRET || KEY in the database's encoding), SECRET the scope's
-- idem__key_lock_secret (edition/functions/common.sql: why).  Every key
-- lock of the edition is taken by this id.
('x' OPERATOR(pg_catalog.||) pg_catalog.encode(pg_catalog.substr(pg_catalog.sha256(
    %SECRET% OPERATOR(pg_catalog.||)
    pg_catalog.convert_to(%KEY%, pg_catalog.getdatabaseencoding())), 1, 8), 'hex'))::bit(64)::bigint
