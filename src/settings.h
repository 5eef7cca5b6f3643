/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  The extension's settings (settings.c): the GUC variables, defined by
 *	  IdemSettingsInit from _PG_init.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_SETTINGS_H
#define IDEMPOTENCY_SETTINGS_H

/* idempotency.stale_policy values */
typedef enum IdemStalePolicy
{
	IDEM_STALE_RECLAIM,
	IDEM_STALE_HOLD
} IdemStalePolicy;

/* The longest await_result, argument or setting: an hour */
#define IDEM_MAX_AWAIT_MS	(60 * 60 * 1000)

extern int	idem_lease_seconds;
extern int	idem_retention_seconds;
extern int	idem_max_key_length;
extern int	idem_stale_policy;
extern int	idem_max_attempts;
extern int	idem_await_result_ms;

extern void IdemSettingsInit(void);
extern void IdemSettingsCheck(void);

#endif							/* IDEMPOTENCY_SETTINGS_H */
