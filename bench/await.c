/*
 * bench/await.c: how soon a claim waiting with await_result answers after
 * the holder commits (bench/await.sh builds and runs it).
 *
 * Two connections.  Each round: the holder claims a fresh key (autocommit),
 * opens a transaction and completes the key; the waiter sends
 * idem_claim(key, await_result => '5 s') and, after a pause that lets it
 * start waiting, the holder commits.  Printed per round, in microseconds:
 * from sending COMMIT to the waiter's answer, and the COMMIT's own round
 * trip (the waiter may answer before the holder's client hears back).
 *
 *   await <conninfo> <rounds> <pause_ms>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <libpq-fe.h>

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void
run(PGconn *c, const char *sql)
{
	PGresult   *r = PQexec(c, sql);

	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "%s: %s", sql, PQerrorMessage(c));
		exit(2);
	}
	PQclear(r);
}

int
main(int argc, char **argv)
{
	PGconn	   *holder,
			   *waiter;
	int			rounds,
				pause_ms;
	char		sql[512];

	if (argc != 4)
	{
		fprintf(stderr, "usage: await <conninfo> <rounds> <pause_ms>\n");
		return 2;
	}
	rounds = atoi(argv[2]);
	pause_ms = atoi(argv[3]);
	holder = PQconnectdb(argv[1]);
	waiter = PQconnectdb(argv[1]);
	if (PQstatus(holder) != CONNECTION_OK || PQstatus(waiter) != CONNECTION_OK)
	{
		fprintf(stderr, "connect: %s%s", PQerrorMessage(holder), PQerrorMessage(waiter));
		return 2;
	}
	run(holder, "DELETE FROM idempotency_keys WHERE scope = 'bench-await'");
	for (int i = 0; i < rounds; i++)
	{
		PGresult   *r;
		double		t0,
					t1,
					t2;
		char	   *outcome;

		snprintf(sql, sizeof(sql),
				 "SELECT idem_claim('k%d', NULL, 'bench-await', lease => '1 min')", i);
		run(holder, sql);
		run(holder, "BEGIN");
		snprintf(sql, sizeof(sql),
				 "SELECT idem_complete('k%d', 201, '{\"id\": %d}', 'bench-await', "
				 "(SELECT token FROM idempotency_keys WHERE scope = 'bench-await' AND key = 'k%d'))",
				 i, i, i);
		run(holder, sql);
		snprintf(sql, sizeof(sql),
				 "SELECT outcome FROM idem_claim('k%d', NULL, 'bench-await', await_result => '5 s')", i);
		if (!PQsendQuery(waiter, sql))
		{
			fprintf(stderr, "send: %s", PQerrorMessage(waiter));
			return 2;
		}
		usleep((pause_ms + i % 10) * 1000);	/* spread over the 10 ms reads */
		t0 = now_us();
		run(holder, "COMMIT");
		t1 = now_us();
		r = PQgetResult(waiter);
		t2 = now_us();
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
		{
			fprintf(stderr, "waiter: %s", PQerrorMessage(waiter));
			return 2;
		}
		outcome = PQgetvalue(r, 0, 0);
		if (strcmp(outcome, "replay") != 0)
		{
			fprintf(stderr, "round %d: waiter answered %s, not replay\n", i, outcome);
			return 1;
		}
		PQclear(r);
		while ((r = PQgetResult(waiter)) != NULL)
			PQclear(r);
		printf("%.0f %.0f\n", t2 - t0, t1 - t0);
	}
	run(holder, "DELETE FROM idempotency_keys WHERE scope = 'bench-await'");
	PQfinish(holder);
	PQfinish(waiter);
	return 0;
}
