/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The extension's settings: the GUC variables and their definitions,
 *	  made by _PG_init (idempotency.c) in every backend that loads the
 *	  library.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "settings.h"

int			idem_lease_seconds = 60;
int			idem_retention_seconds = 24 * 60 * 60;
int			idem_max_key_length = 255;
int			idem_stale_policy = IDEM_STALE_RECLAIM;
int			idem_max_attempts = 0;
int			idem_await_result_ms = 0;

static const struct config_enum_entry stale_policy_options[] = {
	{"reclaim", IDEM_STALE_RECLAIM, false},
	{"hold", IDEM_STALE_HOLD, false},
	{NULL, 0, false}
};

/*
 * Define the extension's settings.
 */
void
IdemSettingsInit(void)
{
	DefineCustomIntVariable("idempotency.lease",
							"Default lease of a processing claim.",
							"A claim whose lease runs out may be taken over by the next claim of the key. idem_claim's lease argument overrides it.",
							&idem_lease_seconds,
							60, 1, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idempotency.retention",
							"Default time a key is kept after it completes or fails.",
							"Rows past their expires_at are deleted by expiry and a later claim of the key starts afresh. idem_claim's retention argument overrides it.",
							&idem_retention_seconds,
							24 * 60 * 60, 1, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idempotency.max_attempts",
							"Most claims that may start work on one key; 0 for no limit.",
							"A claim that would take over a key that has had this many (its first claim and every takeover) makes the key final instead: failed, not retryable. idem_claim's max_attempts argument overrides it.",
							&idem_max_attempts,
							0, 0, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idempotency.await_result",
							"How long a claim waits for a claim in flight of its key to finish; 0 does not wait.",
							"A claim that finds the key processing under another transaction's committed claim waits up to this long for it to complete or fail, and answers as a duplicate of the finished request would; in_progress when the time runs out. Applies to idem_execute, and to idem_claim when its await_result argument is NULL. Only under READ COMMITTED.",
							&idem_await_result_ms,
							0, 0, IDEM_MAX_AWAIT_MS,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idempotency.max_key_length",
							"Longest key or scope accepted, in bytes.",
							NULL,
							&idem_max_key_length,
							255, 1, 1024,
							PGC_SUSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("idempotency.stale_policy",
							 "What a claim does with a processing key whose lease ran out.",
							 "reclaim: the claim takes the key over (outcome reclaimed). hold: nobody may take it over until an operator settles it with idem_resolve (outcome stale).",
							 &idem_stale_policy,
							 IDEM_STALE_RECLAIM,
							 stale_policy_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
}
