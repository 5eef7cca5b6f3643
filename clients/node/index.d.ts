// Types of pg-idempotency (hand-written; index.js and lib/ are the code).

import type { IncomingMessage, ServerResponse } from 'node:http';

/** Anything that runs a query: a pg Client, PoolClient or Pool. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
}

/** A pg Pool (what the middleware takes connections from). */
export interface PoolLike extends Queryable {
  connect(): Promise<PoolClientLike>;
}

export interface PoolClientLike extends Queryable {
  release(err?: Error | boolean): void;
}

/** What an SQLSTATE of the extension means. */
export type ErrorKind =
  | 'request_mismatch' // IK001, 422
  | 'stale_token' // IK002, 409
  | 'not_processing' // IK003, 409
  | 'key_not_found' // IK004, 404
  | 'token_required' // IK005, 500
  | 'row_security_off' // IK006, 503
  | 'invalid_key' // 22004, 22023: 400
  | 'invalid_request' // other class 22 (jsonb refused the body): 400
  | 'read_only' // 25006, 503
  | 'database'; // anything else, 500

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
}

/** A key function's error (or any error, through IdempotencyError.from). */
export class IdempotencyError extends Error {
  constructor(message: string, options?: { code?: string | null; detail?: string; cause?: unknown });
  /** The SQLSTATE, or null. */
  readonly code: string | null;
  readonly kind: ErrorKind;
  /** The HTTP status the IETF draft gives it. */
  readonly status: number;
  readonly title: string;
  /** PostgreSQL's detail (it names the key and the scope). */
  readonly detail: string | undefined;
  /** 409 or 503: retrying later with the same key can succeed. */
  readonly retryable: boolean;
  /** Seconds for Retry-After, or null. */
  readonly retryAfter: number | null;
  /** The RFC 9457 problem to answer (a 500's detail carries no SQL). */
  problem(): Problem;
  static from(err: unknown): IdempotencyError;
}

export type ClaimOutcome = 'new' | 'reclaimed' | 'replay' | 'in_progress' | 'stale';

export interface ClaimResult {
  outcome: ClaimOutcome;
  /** The fencing token (a bigint, as text) of a claim with a lease. */
  token: string | null;
  /** The row's status: 'completed' or 'failed' for a replay. */
  status: 'processing' | 'completed' | 'failed' | null;
  responseCode: number | null;
  /** The stored response, PostgreSQL's jsonb text. */
  response: string | null;
  recoveryPoint: string | null;
  /** Seconds, for Retry-After. */
  retryAfter: number | null;
}

export interface ClaimOptions {
  /** Seconds: a committed claim with a fencing token. */
  lease?: number | null;
  /** Default true: a duplicate waits for the first transaction. */
  wait?: boolean;
  /** Seconds a duplicate of a committed claim waits for its result. */
  awaitResult?: number | null;
}

export type Json = string | object | null;

export function claim(db: Queryable, key: string, request: Json, scope?: string, options?: ClaimOptions): Promise<ClaimResult>;
export function complete(db: Queryable, key: string, status: number, response: Json, scope?: string, token?: string | null): Promise<void>;
export function fail(db: Queryable, key: string, scope?: string, token?: string | null,
  options?: { status?: number | null; response?: Json; retryable?: boolean }): Promise<void>;
export function heartbeat(db: Queryable, key: string, scope: string, token: string | null, lease?: number | null): Promise<Date>;
export function checkpoint(db: Queryable, key: string, point: string, scope?: string, token?: string | null): Promise<void>;
export function release(db: Queryable, key: string, scope?: string, token?: string | null): Promise<void>;

export type Outcome = 'new' | 'replay' | 'in_progress' | 'mismatch' | 'reclaimed' | 'error' | 'timeout' | 'rejected';

/** One request, given to onOutcome once its answer is sent. */
export interface OutcomeEvent {
  outcome: Outcome;
  /** The HTTP status sent. */
  status: number;
  /** '' when there was none. */
  key: string;
  scope: string;
  committed: boolean;
  sqlstate: string | null;
  /** Milliseconds from the request's arrival to its answer. */
  elapsed: number;
  /** Milliseconds idem_claim took, or null (refused before any claim). */
  claimElapsed: number | null;
}

export interface ProblemLike {
  status?: number;
  title?: string;
  detail?: string;
}

export interface IdempotencyOptions<Req extends IncomingMessage = IncomingMessage> {
  pool: PoolLike;
  heartbeatPool?: PoolLike;
  /** The scope from the authenticated caller; default req.idempotencyScope, else ''. */
  scope?: (req: Req) => string | Promise<string>;
  /** Read the scope from this header: only where the header is trusted. */
  scopeFromHeader?: string;
  /** null when the body is fine; a string (422) or a problem otherwise. */
  validate?: (body: unknown) => string | ProblemLike | null | undefined;
  /** Claim committed, with a lease (work outside the database). */
  committed?: (req: Req) => boolean;
  /** Seconds (30). */
  lease?: number;
  /** Seconds (lease / 3). */
  heartbeatEvery?: number;
  /** Default true. */
  waitForDuplicates?: boolean;
  /** Seconds (3). */
  awaitResult?: number;
  /** Bytes (64 KiB). */
  maxBody?: number;
  /**
   * Seconds the handler has to answer a claim (60; 0: never); past them, answered 503 and undone,
   * or, committed, held one more timeout for the handler to settle, then left to lapse.
   */
  timeout?: number;
  onOutcome?: (event: OutcomeEvent) => void;
  log?: { error(...args: unknown[]): void };
}

/** req.idempotency in the handler after the middleware. */
export class Claim {
  readonly key: string;
  readonly scope: string;
  readonly outcome: 'new' | 'reclaimed';
  readonly token: string | null;
  readonly committed: boolean;
  readonly recoveryPoint: string | null;
  readonly body: any;
  readonly rawBody: string;
  readonly lost: boolean;
  readonly settled: boolean;
  /**
   * The claim's transaction: the work and the key commit together.  Once the claim is answered,
   * the connection is refused (query and end reject, code 55000); release() is a no-op.
   */
  tx(): Promise<PoolClientLike>;
  checkpoint(point: string): Promise<void>;
  /** Completes the key, commits, sends the stored bytes. Never rejects. */
  respond(status: number, json: Json): Promise<void>;
  /** A failed attempt: rolled back, or recorded failed and retryable; answered with a problem. */
  fail(problem?: ProblemLike & { headers?: Record<string, string> }): Promise<void>;
  /** An error: undone as fail(), answered with its problem and status. */
  error(err: unknown): Promise<void>;
}

export type Middleware = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void;

export function idempotency<Req extends IncomingMessage = IncomingMessage>(options: IdempotencyOptions<Req>): Middleware;

export function sendProblem(res: ServerResponse, status: number, title: string, detail: string,
  headers?: Record<string, string>): void;

// (@types/node declares the class in 'http'; 'node:http' re-exports it)
declare module 'http' {
  interface IncomingMessage {
    /** Set by the middleware for the handler of a claimed request. */
    idempotency?: Claim;
    /** The scope an authentication middleware sets (the default scope). */
    idempotencyScope?: string;
  }
}
