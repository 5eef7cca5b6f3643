// What a TypeScript service writes against pg-idempotency (README.md's
// examples, typed), compiled with --strict by ../types.check.js: it must
// compile, and each line marked @ts-expect-error must not.
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  idempotency, claim, complete, fail, heartbeat, checkpoint, release, sendProblem,
  IdempotencyError, Claim, ClaimResult, ClaimOutcome, OutcomeEvent, PoolLike, PoolClientLike,
  Problem, ErrorKind, Middleware,
} from 'pg-idempotency';

declare const pool: PoolLike;
declare const client: PoolClientLike;

interface AuthedRequest extends IncomingMessage {
  user: { merchantId: string };
  query: { mode?: string };
}

const idempotent: Middleware = idempotency<AuthedRequest>({
  pool,
  heartbeatPool: pool,
  scope: (req) => req.user.merchantId,
  committed: (req) => req.query.mode === 'card',
  validate: (body) => (typeof body === 'object' && body !== null ? null : 'the body must be an object'),
  lease: 30,
  awaitResult: 3,
  timeout: 60,
  onOutcome: (e: OutcomeEvent) => {
    const timedOut: boolean = e.outcome === 'timeout';
    void timedOut;
    const ms: number = e.elapsed;
    const claimMs: number | null = e.claimElapsed;
    void ms; void claimMs;
  },
});

// the handler, after the middleware
async function handler(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const idem: Claim | undefined = req.idempotency;
  if (idem === undefined) {
    sendProblem(res, 500, 'Internal Server Error', 'no claim');
    return;
  }
  try {
    const tx = await idem.tx();
    const r = await tx.query('INSERT INTO payments (scope) VALUES ($1) RETURNING id', [idem.scope]);
    await idem.checkpoint('charged');
    await idem.respond(201, { payment_id: r.rows[0].id });
  } catch (err) {
    await idem.error(err);
  }
  // @ts-expect-error: the claim's fields are read-only
  idem.key = 'other';
}

// the key functions, inside a transaction of the service's own
async function direct(): Promise<void> {
  const c: ClaimResult = await claim(client, 'order-1', { amount: 100 }, 'merchant-7', { lease: 30, wait: false });
  const outcome: ClaimOutcome = c.outcome;
  if (outcome === 'new' || outcome === 'reclaimed') {
    const until: Date = await heartbeat(client, 'order-1', 'merchant-7', c.token, 30);
    void until;
    await checkpoint(client, 'order-1', 'charged', 'merchant-7', c.token);
    await complete(client, 'order-1', 201, { ok: true }, 'merchant-7', c.token);
  } else if (outcome === 'replay') {
    const status: number | null = c.responseCode;
    void status;
  }
  await fail(client, 'order-2', 'merchant-7', null, { status: 502, retryable: true });
  await release(client, 'order-3');
  // @ts-expect-error: the status is a number
  await complete(client, 'order-4', '201', {});
  // @ts-expect-error: no such outcome
  const bad: ClaimOutcome = 'done';
  void bad;
}

// errors: every SQLSTATE as a kind with its HTTP status
function answer(err: unknown): Problem {
  const e = IdempotencyError.from(err);
  const kind: ErrorKind = e.kind;
  const retry: number | null = e.retryAfter;
  void kind; void retry;
  return e.problem();
}

void idempotent; void handler; void direct; void answer;
