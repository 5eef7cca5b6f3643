-- settle_times (edition/build.sh expands "--@ settle_times STAMP=.."): the
-- times in the SET list of the UPDATE that makes a processing key final
-- (idem_complete, idem_fail, on idempotency_keys AS k): expires_at = STAMP
-- + the retention the claim asked for (a processing row keeps expires_at =
-- locked_until + retention; in epoch seconds as the C build's statement,
-- exact to the microsecond), due_at lowered to it only if that comes
-- first, the lease ended, updated_at = STAMP.
expires_at = pg_catalog.to_timestamp(pg_catalog.date_part('epoch', %STAMP%) OPERATOR(pg_catalog.+)
                 pg_catalog.date_part('epoch', k.expires_at OPERATOR(pg_catalog.-) k.locked_until)),
due_at = LEAST(k.due_at,
               pg_catalog.to_timestamp(pg_catalog.date_part('epoch', %STAMP%) OPERATOR(pg_catalog.+)
                   pg_catalog.date_part('epoch', k.expires_at OPERATOR(pg_catalog.-) k.locked_until))),
locked_until = NULL, updated_at = %STAMP%
