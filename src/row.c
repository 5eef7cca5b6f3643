/*-------------------------------------------------------------------------
 *
 * row.c
 *	  A key's row as the statements read it: its columns taken apart by name,
 *	  and the status type's values.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "commands/sequence.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "access/detoast.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "common.h"
#include "store.h"

/*
 * The status type's three values (enum OIDs), for the type typid, read once
 * per backend: a row's status is compared with them, and a row written
 * without RETURNING gets its status from them.  Kept until the type
 * changes (a syscache callback on pg_type).
 */
static const char *const status_labels[] = {
	[IDEM_PROCESSING] = "processing",
	[IDEM_COMPLETED] = "completed",
	[IDEM_FAILED] = "failed",
};

static Oid	status_typid = InvalidOid;
static Datum status_values[lengthof(status_labels)];
static bool status_callback = false;

static void
StatusValuesInvalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	status_typid = InvalidOid;
}

/* The enum value of status, of the status type typid */
Datum
IdemStatusValue(Oid typid, IdemStatus status)
{
	if (typid != status_typid)
	{
		size_t		i;

		if (!status_callback)
		{
			CacheRegisterSyscacheCallback(TYPEOID, StatusValuesInvalidate, (Datum) 0);
			status_callback = true;
		}
		status_typid = InvalidOid;
		for (i = 0; i < lengthof(status_labels); i++)
			status_values[i] = DirectFunctionCall2(enum_in,
												   CStringGetDatum(status_labels[i]),
												   ObjectIdGetDatum(typid));
		status_typid = typid;
	}
	return status_values[status];
}

/* Which status the enum value is */
static IdemStatus
StatusOf(Datum value, Oid typid)
{
	if (value == IdemStatusValue(typid, IDEM_PROCESSING))
		return IDEM_PROCESSING;
	if (value == IdemStatusValue(typid, IDEM_COMPLETED))
		return IDEM_COMPLETED;
	if (value == IdemStatusValue(typid, IDEM_FAILED))
		return IDEM_FAILED;
	elog(ERROR, "unexpected idempotency_status value %u", DatumGetObjectId(value));
	pg_unreachable();
}

/* The columns of IDEM_STMT_SELECT, read by name */
typedef enum RowColumn
{
	COL_STATUS,
	COL_REQUEST_HASH,
	COL_RESPONSE_CODE,
	COL_RESPONSE,
	COL_TOKEN,
	COL_LOCKED_UNTIL,
	COL_RECOVERY_POINT,
	COL_RETRYABLE,
	COL_EXPIRES_AT,
	COL_ATTEMPTS,				/* 0.4.0 on: optional */
	ROW_NCOLUMNS
} RowColumn;

static const char *const row_column_names[ROW_NCOLUMNS] = {
	[COL_STATUS] = "status",
	[COL_REQUEST_HASH] = "request_hash",
	[COL_RESPONSE_CODE] = "response_code",
	[COL_RESPONSE] = "response",
	[COL_TOKEN] = "token",
	[COL_LOCKED_UNTIL] = "locked_until",
	[COL_RECOVERY_POINT] = "recovery_point",
	[COL_RETRYABLE] = "retryable",
	[COL_EXPIRES_AT] = "expires_at",
	[COL_ATTEMPTS] = "attempts",
};

/*
 * Their numbers in the row types read lately: the table's, and on a
 * distributed table those of the shards a local execution read the row from (a
 * shard made after a column was dropped from the table numbers its columns
 * without the gap); the oldest is replaced when all are taken.  Each is known
 * by its type cache entry's identifier, which changes whenever the type's
 * columns do.
 */
#define ROW_TYPES 64

typedef struct RowType
{
	uint64		ident;			/* assign_record_type_identifier; 0: empty */
	int			attnums[ROW_NCOLUMNS];
} RowType;

static RowType row_types[ROW_TYPES];
static int	row_types_next = 0;

/* The columns' numbers in desc, the row type of the key's row */
static const int *
RowAttnums(TupleDesc desc)
{
	uint64		ident = assign_record_type_identifier(desc->tdtypeid, desc->tdtypmod);
	RowType    *t;

	for (int i = 0; i < ROW_TYPES; i++)
	{
		if (row_types[i].ident == ident)
			return row_types[i].attnums;
	}
	t = &row_types[row_types_next];
	row_types_next = (row_types_next + 1) % ROW_TYPES;
	t->ident = 0;
	for (int col = 0; col < ROW_NCOLUMNS; col++)
	{
		int			attnum = SPI_fnumber(desc, row_column_names[col]);

		if (attnum <= 0 && col != COL_ATTEMPTS)
			elog(ERROR, "key row has no column \"%s\"", row_column_names[col]);
		t->attnums[col] = Max(attnum, 0);	/* 0: a table without it */
	}
	t->ident = ident;
	return t->attnums;
}

/* The key's row, its columns taken apart once (heap_deform_tuple) */
typedef struct KeyRow
{
	Datum	   *values;			/* by attnum - 1, as nulls */
	bool	   *nulls;
	const int  *attnums;		/* RowAttnums of its row type */
	Oid			status_type;
} KeyRow;

/* Take the whole-row value d apart into *kr, in the current memory context */
static void
DeformKeyRow(Datum d, KeyRow *kr)
{
	HeapTupleHeader header = DatumGetHeapTupleHeader(d);
	TupleDesc	desc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(header),
											  HeapTupleHeaderGetTypMod(header));
	HeapTupleData whole;

	whole.t_len = HeapTupleHeaderGetDatumLength(header);
	ItemPointerSetInvalid(&whole.t_self);
	whole.t_tableOid = InvalidOid;
	whole.t_data = header;
	kr->values = palloc(sizeof(Datum) * desc->natts);
	kr->nulls = palloc(sizeof(bool) * desc->natts);
	heap_deform_tuple(&whole, desc, kr->values, kr->nulls);
	kr->attnums = RowAttnums(desc);
	kr->status_type = TupleDescAttr(desc, kr->attnums[COL_STATUS] - 1)->atttypid;
	ReleaseTupleDesc(desc);
}

/* One column of the key's row; NULL if the table has no such column */
static Datum
RowValue(const KeyRow *kr, RowColumn col, bool *isnull)
{
	int			i = kr->attnums[col] - 1;

	if (i < 0)
	{
		*isnull = true;
		return (Datum) 0;
	}
	*isnull = kr->nulls[i];
	return kr->values[i];
}

/*
 * Copy the first row of an IDEM_STMT_SELECT result into row, allocating
 * in mcxt.  Sets row->found to false when there is no row.
 */
void
IdemReadRow(IdemRow *row, MemoryContext mcxt)
{
	KeyRow		kr;
	bool		isnull;
	Datum		d;
	MemoryContext old;

	memset(row, 0, sizeof(IdemRow));
	if (SPI_processed == 0)
		return;

	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		elog(ERROR, "key row read as NULL");
	DeformKeyRow(d, &kr);
	old = MemoryContextSwitchTo(mcxt);

	row->found = true;
	row->status = RowValue(&kr, COL_STATUS, &isnull);
	row->status_code = StatusOf(row->status, kr.status_type);
	d = RowValue(&kr, COL_REQUEST_HASH, &isnull);
	row->request_hash = isnull ? NULL : DatumGetByteaPCopy(d);
	d = RowValue(&kr, COL_RESPONSE_CODE, &isnull);
	row->response_code_null = isnull;
	row->response_code = isnull ? 0 : DatumGetInt32(d);
	d = RowValue(&kr, COL_RESPONSE, &isnull);
	row->response = isnull ? (Datum) 0 : PointerGetDatum(PG_DETOAST_DATUM_COPY(d));
	row->token = DatumGetInt64(RowValue(&kr, COL_TOKEN, &isnull));
	d = RowValue(&kr, COL_LOCKED_UNTIL, &isnull);
	row->locked_until_null = isnull;
	row->locked_until = isnull ? 0 : DatumGetTimestampTz(d);
	d = RowValue(&kr, COL_RECOVERY_POINT, &isnull);
	row->recovery_point = isnull ? NULL : DatumGetTextPCopy(d);
	row->retryable = DatumGetBool(RowValue(&kr, COL_RETRYABLE, &isnull));
	row->expires_at = DatumGetTimestampTz(RowValue(&kr, COL_EXPIRES_AT, &isnull));
	d = RowValue(&kr, COL_ATTEMPTS, &isnull);
	row->attempts = isnull ? 0 : DatumGetInt32(d);

	MemoryContextSwitchTo(old);
}
