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

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"

#include "compat.h"
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

/* The settings, in the order IdemSettingsInit defines them */
static const char *const setting_names[] = {
	"idempotency.lease",
	"idempotency.retention",
	"idempotency.max_attempts",
	"idempotency.await_result",
	"idempotency.max_key_length",
	"idempotency.stale_policy",
};

#define NUM_SETTINGS	lengthof(setting_names)

/*
 * The settings (bit i: setting_names[i]) whose value from before the
 * library was loaded PostgreSQL refused when the library defined them
 * (IdemSettingsInit), and each setting's variable, for IdemSettingsCheck.
 */
static uint32 settings_refused = 0;
static uint32 settings_refused_once = 0;
static struct config_generic *setting_vars[NUM_SETTINGS];

/* The GUC variables (or placeholders) of the settings, NULL where none */
static void
FindSettings(struct config_generic **found)
{
	int			n;
	struct config_generic **vars = IdemGucVariables(&n);

	for (int s = 0; s < (int) NUM_SETTINGS; s++)
	{
		found[s] = NULL;
		for (int i = 0; i < n; i++)
			if (strcmp(vars[i]->name, setting_names[s]) == 0)
				found[s] = vars[i];
	}
	IdemGucVariablesDone(vars);
}

/*
 * Define the extension's settings.
 *
 * Loaded on a function's first call (not preloaded), a setting may have
 * been given a value already, kept by PostgreSQL in a placeholder until
 * now.  Its reset value (what RESET returns to) comes from the
 * configuration file, ALTER DATABASE / ROLE ... SET or the connection's
 * options, the last replacing the others while a placeholder; a SET or SET
 * LOCAL in the session is layered above it.  Defining the setting applies
 * each again, and PostgreSQL refuses, with no more than a WARNING, an
 * invalid value, and a value of a superuser-only setting (max_key_length,
 * stale_policy) that a role which may not set it gave: a refused reset
 * value leaves the built-in default in its place.  So a caller's
 * options=-c idempotency.stale_policy=reclaim undid a DBA's hold, and a
 * retention mistyped in ALTER DATABASE became a day.  Such settings are
 * noted here, and IdemSettingsCheck refuses the session's calls while they
 * have their default, as a preloaded library refuses such a session at its
 * start.  A refused SET or SET LOCAL of the session's own (a mistyped
 * retention, a tenant's stale_policy) leaves the value below it in force,
 * the one a preloaded library's SET, failing, would have left: only the
 * call that loaded the library is refused, as that SET would have been
 * (a retention the caller meant to be a week and a day is not a day
 * silently).  A placeholder without a value (a SET undone by RESET, a
 * rollback or the end of a SET LOCAL's transaction) counts for nothing.
 */
void
IdemSettingsInit(void)
{
	struct config_generic *before[NUM_SETTINGS];
	GucSource	reset_source[NUM_SETTINGS];
	GucSource	source[NUM_SETTINGS];
	bool		given = false;

	if (!process_shared_preload_libraries_in_progress)
	{
		FindSettings(before);
		for (int i = 0; i < (int) NUM_SETTINGS; i++)
		{
			reset_source[i] = before[i] ? before[i]->reset_source : PGC_S_DEFAULT;
			source[i] = before[i] ? before[i]->source : PGC_S_DEFAULT;
			given |= source[i] != PGC_S_DEFAULT || reset_source[i] != PGC_S_DEFAULT;
		}
	}

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

	if (given)
	{
		FindSettings(setting_vars);
		for (int i = 0; i < (int) NUM_SETTINGS; i++)
		{
			if (setting_vars[i] == NULL)
				continue;		/* cannot be: each was defined above */
			if (reset_source[i] != PGC_S_DEFAULT &&
				setting_vars[i]->reset_source == PGC_S_DEFAULT)
				settings_refused |= UINT32_C(1) << i;
			else if (setting_vars[i]->source < source[i])
				settings_refused_once |= UINT32_C(1) << i;
		}
	}
}

/*
 * Refuse the call if a setting's value from before the library was loaded
 * was refused (IdemSettingsInit): one from the file, the database or role,
 * or the connection's options while the setting still has its default
 * (one the session has SET since counts as set); one the session SET, in
 * the call that loaded the library only.  Called by IdemConnect, which
 * every function that reads a setting passes through, and idem_execute.
 */
void
IdemSettingsCheck(void)
{
	if (likely((settings_refused | settings_refused_once) == 0))
		return;
	for (int i = 0; i < (int) NUM_SETTINGS; i++)
	{
		uint32		bit = UINT32_C(1) << i;

		if ((settings_refused & bit) && setting_vars[i]->source == PGC_S_DEFAULT)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the value of \"%s\" given before the extension was loaded was refused", setting_names[i]),
					 errdetail("When the library was loaded, PostgreSQL refused the value (its WARNING said why: an invalid value, or one only a superuser may set, such as from the connection's options) and left the setting at its default, not at the value the database or the server configuration gives it."),
					 errhint("Connect without that value, or correct it where it is set (ALTER DATABASE or ALTER ROLE ... SET, the configuration file); with shared_preload_libraries = 'idempotency' PostgreSQL refuses such a value when the session starts.")));
		if (settings_refused_once & bit)
		{
			settings_refused_once &= ~bit;
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the value set for \"%s\" before the extension was loaded was refused", setting_names[i]),
					 errdetail("When the library was loaded, PostgreSQL refused the value this session had SET (its WARNING said why: an invalid value, or one only a superuser may set) and kept the value it had before, which later calls use."),
					 errhint("Set a valid value; with shared_preload_libraries = 'idempotency' such a SET fails when it is made.")));
		}
	}
}
