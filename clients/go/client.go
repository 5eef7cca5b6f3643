// Package idempotency handles the Idempotency-Key header of HTTP services on
// the idempotency PostgreSQL extension: the key functions on database/sql
// with lib/pq (idem_claim, idem_complete, idem_fail, idem_heartbeat,
// idem_checkpoint, idem_release), the extension's SQLSTATEs as errors with
// their HTTP status, and a net/http middleware implementing the HTTP
// contract of the project's example services (examples/README.md).  The
// ginidem subpackage adapts the middleware to Gin.
//
// Import it as
//
//	import idempotency "github.com/idempotency/idempotency/clients/go"
//
// and open the database with lib/pq (import _ "github.com/lib/pq" and
// sql.Open("postgres", ...)).
package idempotency

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Queryer is what the key functions run on: a *sql.DB (each statement
// commits by itself), a *sql.Conn, or a *sql.Tx (the claim, the work and the
// completion commit together).
type Queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Outcome is what idem_claim found (docs/reference.md, "Outcomes of idem_claim").
type Outcome string

const (
	// OutcomeNew: the key is now the caller's: do the work.
	OutcomeNew Outcome = "new"
	// OutcomeReplay: the key was completed before (or failed, not retryable):
	// answer the stored response.
	OutcomeReplay Outcome = "replay"
	// OutcomeInProgress: another request holds the key: 409 + Retry-After.
	OutcomeInProgress Outcome = "in_progress"
	// OutcomeReclaimed: an earlier attempt died or failed retryably; the key is the
	// caller's now, with the earlier attempt's recovery point.
	OutcomeReclaimed Outcome = "reclaimed"
	// OutcomeStale: idempotency.stale_policy = 'hold': an operator must settle the key.  409.
	OutcomeStale Outcome = "stale"
)

// Mine is true for OutcomeNew and OutcomeReclaimed: the caller holds the key and does the work.
func (o Outcome) Mine() bool { return o == OutcomeNew || o == OutcomeReclaimed }

// FromSetting, as ClaimOptions.AwaitResult, leaves the wait to the
// idempotency.await_result setting.
const FromSetting time.Duration = -1

// ClaimOptions are idem_claim's arguments besides key, request and scope.
type ClaimOptions struct {
	// Lease of a committed claim; 0: the idempotency.lease setting.
	Lease time.Duration
	// Wait for a duplicate whose transaction is still open (wait => true),
	// then answer as for the finished request; false: in_progress at once.
	Wait bool
	// AwaitResult: how long to wait for a committed claim in flight to
	// finish (0: not at all; FromSetting: idempotency.await_result).
	AwaitResult time.Duration
}

// Claim is the row idem_claim returns.
type Claim struct {
	Outcome Outcome
	// Token is the fencing token (New and Reclaimed only; 0 otherwise).
	Token int64
	// ResponseCode is the stored status (OutcomeReplay; 0 when none was stored).
	ResponseCode int
	// Status is the row's status: "completed" or "failed" for a replay.
	Status string
	// Response is the stored response as PostgreSQL's jsonb text (Replay;
	// nil when none was stored): send these bytes.
	Response []byte
	// RetryAfter is the time until a retry may succeed, in whole seconds,
	// at least 1 (OutcomeInProgress).
	RetryAfter int
	// RecoveryPoint is how far an earlier attempt got (OutcomeReclaimed), as
	// idem_checkpoint recorded it ("" when none).
	RecoveryPoint string
}

const claimSQL = `SELECT outcome::text, coalesce(token, 0), coalesce(response_code, 0), coalesce(status::text, ''), response::text,
       coalesce(recovery_point, ''), coalesce(ceil(extract(epoch FROM retry_after))::int, 1)
FROM idem_claim($1, $2::text::jsonb, $3,
                lease => make_interval(secs => $4::float8),
                wait => $5,
                await_result => make_interval(secs => $6::float8))`

func secs(d time.Duration) any {
	if d < 0 {
		return nil // make_interval(secs => NULL) is NULL: the setting
	}
	return d.Seconds()
}

func text(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

func tokenArg(t int64) any {
	if t == 0 {
		return nil // the claim of this transaction
	}
	return t
}

// ClaimKey runs idem_claim(key, request, scope, lease, wait, await_result).
// request is the request's JSON text (nil: no request hash).  A key used
// before with another request is an *Error matching ErrRequestMismatch.
func ClaimKey(ctx context.Context, q Queryer, key string, request []byte, scope string, opts ClaimOptions) (*Claim, error) {
	lease := secs(opts.Lease)
	if opts.Lease == 0 {
		lease = nil
	}
	var c Claim
	var outcome string
	var response sql.NullString
	err := q.QueryRowContext(ctx, claimSQL, key, text(request), scope, lease, opts.Wait, secs(opts.AwaitResult)).
		Scan(&outcome, &c.Token, &c.ResponseCode, &c.Status, &response, &c.RecoveryPoint, &c.RetryAfter)
	if err != nil {
		return nil, wrap(err)
	}
	c.Outcome = Outcome(outcome)
	switch c.Outcome {
	case OutcomeNew, OutcomeReplay, OutcomeInProgress, OutcomeReclaimed, OutcomeStale:
	default:
		return nil, fmt.Errorf("idempotency: idem_claim answered an unknown outcome %q", outcome)
	}
	if response.Valid {
		c.Response = []byte(response.String)
	}
	if c.RetryAfter < 1 {
		c.RetryAfter = 1
	}
	return &c, nil
}

// Complete runs idem_complete(key, code, response, scope, token) and returns
// the response as PostgreSQL stores it (jsonb text, nil for none): the bytes
// a replay sends.  token 0 (NULL) only in the transaction that made the claim.
func Complete(ctx context.Context, q Queryer, key string, code int, response []byte, scope string, token int64) ([]byte, error) {
	var stored sql.NullString
	err := q.QueryRowContext(ctx, "SELECT $3::text::jsonb::text FROM idem_complete($1, $2, $3::text::jsonb, $4, $5)",
		key, code, text(response), scope, tokenArg(token)).Scan(&stored)
	if err != nil {
		return nil, wrap(err)
	}
	if !stored.Valid {
		return nil, nil
	}
	return []byte(stored.String), nil
}

// Fail runs idem_fail(key, scope, token, code, response, retryable).
// Retryable: the next claim takes the key over (Reclaimed); otherwise the
// stored error (code 0 and nil response: none) is replayed.
func Fail(ctx context.Context, q Queryer, key, scope string, token int64, code int, response []byte, retryable bool) error {
	var c any
	if code != 0 {
		c = code
	}
	_, err := q.ExecContext(ctx, "SELECT FROM idem_fail($1, $2, $3, $4, $5::text::jsonb, $6)",
		key, scope, tokenArg(token), c, text(response), retryable)
	return wrap(err)
}

// Heartbeat runs idem_heartbeat(key, scope, token, lease): extends the lease
// of a claim the caller still holds (ErrStaleToken or ErrNotProcessing when
// it does not).  lease 0: the lease the setting gives.
func Heartbeat(ctx context.Context, q Queryer, key, scope string, token int64, lease time.Duration) error {
	var l any
	if lease > 0 {
		l = lease.Seconds()
	}
	_, err := q.ExecContext(ctx, "SELECT FROM idem_heartbeat($1, $2, $3, make_interval(secs => $4::float8))",
		key, scope, tokenArg(token), l)
	return wrap(err)
}

// Checkpoint runs idem_checkpoint(key, point, scope, token): records
// progress, fenced by the token ("" clears the recovery point).
func Checkpoint(ctx context.Context, q Queryer, key, point, scope string, token int64) error {
	var p any
	if point != "" {
		p = point
	}
	_, err := q.ExecContext(ctx, "SELECT FROM idem_checkpoint($1, $2, $3, $4)", key, p, scope, tokenArg(token))
	return wrap(err)
}

// Release runs idem_release(key, scope, token): gives the claim up; the next
// claim is New.
func Release(ctx context.Context, q Queryer, key, scope string, token int64) error {
	_, err := q.ExecContext(ctx, "SELECT FROM idem_release($1, $2, $3)", key, scope, tokenArg(token))
	return wrap(err)
}
