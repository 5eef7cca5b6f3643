-- test/citus/sql/delegate.sql: the README's "Scaling out" recipe, second
-- half: every function of the extension that takes a scope, distributed by
-- that argument and co-located with idempotency_keys, so that an autocommit
-- call on the coordinator is delegated to the worker holding the scope.
\set ON_ERROR_STOP 1
-- every function of the extension that takes a scope, by that argument
SELECT format('SELECT create_distributed_function(%L, %L, colocate_with => %L)',
              p.oid::regprocedure, 'scope', 'idempotency_keys')
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
WHERE 'scope' = ANY (p.proargnames)
ORDER BY p.oid::regprocedure::text
\gexec
SELECT count(*) FROM pg_dist_object o JOIN pg_proc p ON o.objid = p.oid
WHERE o.classid = 'pg_proc'::regclass AND o.distribution_argument_index IS NOT NULL;
