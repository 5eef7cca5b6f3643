package main

// Gin middleware for the Idempotency-Key header, on the idempotency
// extension.  It replaces the Redis SETNX lock + response cache of the seed
// middleware: the key is a row claimed inside PostgreSQL, in the same
// transaction as the handler's work (or, for work outside the database, a
// committed claim with a lease and a fencing token).
//
// For each request it:
//   1. requires the Idempotency-Key header (400), a JSON body (415, 400),
//      and whatever Config.Validate says (422), before anything is claimed;
//   2. claims the key: idem_claim(key, body, scope = Merchant-Id header);
//   3. answers a replay with the stored code and body (Idempotent-Replayed:
//      true), a request still in flight with 409 + Retry-After, a body
//      different from the first one with 422;
//   4. otherwise runs the handler, which does its work in Tx(c) and calls
//      SetResult(c, code, json) on success, or writes an error itself;
//   5. on success completes the key in the handler's transaction, commits,
//      and sends the response as PostgreSQL stored it (jsonb text), so the
//      first answer and every replay are the same bytes; on failure rolls
//      back (in one transaction) or records the attempt as failed,
//      retryable (committed claim).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"log"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/lib/pq"
)

// Config of the middleware.
type Config struct {
	DB          *sql.DB // requests
	HeartbeatDB *sql.DB // heartbeats only: never starved by busy request connections
	Lease       time.Duration
	Heartbeat   time.Duration // how often a committed claim's lease is renewed
	// Wait: a duplicate of a request whose transaction is still open waits
	// for it (holding a DB connection) and then replays; false answers 409
	// at once.
	Wait bool
	// Validate checks the body before any claim; a non-nil problem is sent.
	Validate func(body []byte) *Problem
	// Committed says whether this request's claim is committed first, with
	// a lease (work outside the database); otherwise claim, work and
	// complete share one transaction.
	Committed func(c *gin.Context) bool
	// AwaitResult: a committed claim that finds its key in flight (the
	// first request still at the card network) waits up to this long,
	// holding a DB connection but no lock, for its result and replays it
	// instead of answering 409; 0 answers 409 at once.
	AwaitResult time.Duration
	MaxBody     int64
}

// Problem is an application/problem+json answer (RFC 9457).
type Problem struct {
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Type   string `json:"type"`
}

// WriteProblem sends p and aborts the chain.
func WriteProblem(c *gin.Context, p *Problem, headers ...string) {
	p.Type = "about:blank"
	for i := 0; i+1 < len(headers); i += 2 {
		c.Header(headers[i], headers[i+1])
	}
	body, _ := json.Marshal(p)
	c.Data(p.Status, "application/problem+json", body)
	c.Abort()
}

type claimState struct {
	key, scope    string
	token         int64
	committed     bool
	recoveryPoint string
	outcome       string
	tx            *sql.Tx
	resultCode    int
	resultBody    []byte
	cfg           *Config
}

const (
	stateKey = "idempotency.claim"
	bodyKey  = "idempotency.body" // the request body, read by the middleware
)

func state(c *gin.Context) *claimState { return c.MustGet(stateKey).(*claimState) }

// Tx is the transaction the handler does its work in: the claim's own, or
// (committed claim) one begun at the first call, in which the key is then
// completed.
func Tx(c *gin.Context) (*sql.Tx, error) {
	s := state(c)
	if s.tx == nil {
		tx, err := s.cfg.DB.BeginTx(c.Request.Context(), nil)
		if err != nil {
			return nil, err
		}
		s.tx = tx
	}
	return s.tx, nil
}

// RecoveryPoint is what an earlier attempt recorded with Checkpoint (only a
// 'reclaimed' claim has one).
func RecoveryPoint(c *gin.Context) string { return state(c).recoveryPoint }

// Checkpoint records progress of a committed claim, fenced by its token:
// it fails (IK002) if another attempt took the key over.
func Checkpoint(c *gin.Context, point string) error {
	s := state(c)
	_, err := s.cfg.DB.ExecContext(c.Request.Context(),
		"SELECT idem_checkpoint($1, $2, $3, $4)", s.key, point, s.scope, s.token)
	if err == nil {
		s.recoveryPoint = point
	}
	return err
}

// SetResult is the handler's successful answer (a JSON document), recorded
// with the key and sent by the middleware.
func SetResult(c *gin.Context, code int, body []byte) {
	s := state(c)
	s.resultCode, s.resultBody = code, body
}

const claimSQL = `SELECT outcome, coalesce(token, 0), coalesce(response_code, 0), response::text,
       coalesce(recovery_point, ''), coalesce(ceil(extract(epoch FROM retry_after))::int, 1)
FROM idem_claim($1, $2::jsonb, $3, lease => make_interval(secs => $4), wait => $5,
                await_result => make_interval(secs => $6))`

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func claim(ctx context.Context, q queryer, cfg *Config, s *claimState, body []byte, wait bool, await time.Duration) (int, sql.NullString, int, error) {
	var code, retryAfter int
	var response sql.NullString
	err := q.QueryRowContext(ctx, claimSQL, s.key, string(body), s.scope, cfg.Lease.Seconds(), wait, await.Seconds()).
		Scan(&s.outcome, &s.token, &code, &response, &s.recoveryPoint, &retryAfter)
	return code, response, retryAfter, err
}

// Middleware returns the Gin handler; put it before the payment handlers.
func Middleware(cfg Config) gin.HandlerFunc {
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 64 << 10
	}
	return func(c *gin.Context) {
		key := c.GetHeader("Idempotency-Key")
		if key == "" {
			WriteProblem(c, &Problem{Status: 400, Title: "Idempotency-Key header missing",
				Detail: "This request needs an Idempotency-Key header."})
			return
		}
		if mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type")); err != nil || mt != "application/json" {
			WriteProblem(c, &Problem{Status: 415, Title: "Unsupported Content-Type",
				Detail: "Send the request as application/json."})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, cfg.MaxBody))
		if err != nil {
			WriteProblem(c, &Problem{Status: 413, Title: "Body too large or unreadable", Detail: "At most 64 KiB."})
			return
		}
		if !json.Valid(body) {
			WriteProblem(c, &Problem{Status: 400, Title: "Malformed JSON", Detail: "The body is not valid JSON."})
			return
		}
		if cfg.Validate != nil {
			if p := cfg.Validate(body); p != nil {
				WriteProblem(c, p)
				return
			}
		}
		c.Set(bodyKey, body)
		s := &claimState{key: key, scope: c.GetHeader("Merchant-Id"), cfg: &cfg}
		s.committed = cfg.Committed != nil && cfg.Committed(c)
		c.Set(stateKey, s)
		ctx := c.Request.Context()

		var code, retryAfter int
		var response sql.NullString
		if s.committed {
			code, response, retryAfter, err = claim(ctx, cfg.DB, &cfg, s, body, true, cfg.AwaitResult)
		} else {
			s.tx, err = cfg.DB.BeginTx(ctx, nil)
			if err == nil {
				code, response, retryAfter, err = claim(ctx, s.tx, &cfg, s, body, cfg.Wait, 0)
			}
		}
		if err != nil {
			s.rollback()
			answerError(c, err)
			return
		}
		switch s.outcome {
		case "replay":
			s.rollback()
			c.Header("Idempotent-Replayed", "true")
			sendStored(c, code, response)
			c.Abort()
			return
		case "new", "reclaimed":
		default: // in_progress, stale
			s.rollback()
			WriteProblem(c, &Problem{Status: 409, Title: "A request with this Idempotency-Key is being processed",
				Detail: "Retry after the time in Retry-After."}, "Retry-After", strconv.Itoa(max(1, retryAfter)))
			return
		}

		var stop func()
		if s.committed {
			stop = s.heartbeat()
		}
		c.Next()
		if stop != nil {
			stop()
		}
		s.finish(c)
	}
}

func max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func (s *claimState) rollback() {
	if s.tx != nil {
		_ = s.tx.Rollback()
		s.tx = nil
	}
}

// heartbeat renews the lease on the heartbeat pool until stopped.
func (s *claimState) heartbeat() (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(s.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_, err := s.cfg.HeartbeatDB.Exec("SELECT idem_heartbeat($1, $2, $3, make_interval(secs => $4))",
					s.key, s.scope, s.token, s.cfg.Lease.Seconds())
				if err != nil {
					log.Printf("heartbeat of %q: %v", s.key, err)
				}
			}
		}
	}()
	return func() { close(done) }
}

// finish records the handler's outcome with the key.
func (s *claimState) finish(c *gin.Context) {
	ctx := c.Request.Context()
	if s.resultCode == 0 {
		// The handler failed and answered itself.
		s.rollback()
		if s.committed {
			// The attempt stays recorded, failed and retryable: the next
			// request with this key takes it over and sees the recovery point.
			if _, err := s.cfg.DB.ExecContext(ctx, "SELECT idem_fail($1, $2, $3)", s.key, s.scope, s.token); err != nil {
				log.Printf("idem_fail of %q: %v", s.key, err)
			}
		}
		if !c.Writer.Written() {
			WriteProblem(c, &Problem{Status: 500, Title: "Internal error", Detail: "The request was not processed."})
		}
		return
	}
	tx, err := Tx(c)
	var stored sql.NullString
	if err == nil {
		var token any // NULL: the claim was made in this transaction
		if s.committed {
			token = s.token
		}
		_, err = tx.ExecContext(ctx, "SELECT idem_complete($1, $2, $3::jsonb, $4, $5)",
			s.key, s.resultCode, string(s.resultBody), s.scope, token)
		if err == nil {
			err = tx.QueryRowContext(ctx, "SELECT $1::jsonb::text", string(s.resultBody)).Scan(&stored)
		}
		if err == nil {
			err = tx.Commit()
			s.tx = nil
		}
	}
	if err != nil {
		s.rollback()
		answerError(c, err)
		return
	}
	sendStored(c, s.resultCode, stored)
}

// sendStored sends a response as PostgreSQL stored it.
func sendStored(c *gin.Context, code int, body sql.NullString) {
	if !body.Valid {
		c.Status(code)
		c.Writer.WriteHeaderNow()
		return
	}
	c.Data(code, "application/json", []byte(body.String))
}

// answerError maps the extension's SQLSTATEs to HTTP; anything else is
// logged and answered 500 without details.
func answerError(c *gin.Context, err error) {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch pqErr.Code {
		case "IK001":
			WriteProblem(c, &Problem{Status: 422, Title: "Idempotency-Key reused with a different request body",
				Detail: pqErr.Detail})
			return
		case "22004", "22023":
			WriteProblem(c, &Problem{Status: 400, Title: "Invalid Idempotency-Key or Merchant-Id",
				Detail: pqErr.Message})
			return
		case "IK002", "IK003":
			WriteProblem(c, &Problem{Status: 409, Title: "This attempt lost its claim on the Idempotency-Key",
				Detail: "Another attempt took the key over; retry to get its result."}, "Retry-After", "1")
			return
		case "25006":
			WriteProblem(c, &Problem{Status: 503, Title: "Database is read-only", Detail: "Retry later."},
				"Retry-After", "1")
			return
		}
		// other data exceptions (class 22): PostgreSQL refused the body as
		// jsonb (a \u0000 in a string, a number out of numeric's range)
		if pqErr.Code.Class() == "22" {
			WriteProblem(c, &Problem{Status: 400, Title: "Invalid request", Detail: "PostgreSQL did not accept the body."})
			return
		}
	}
	log.Printf("request failed: %v", err)
	WriteProblem(c, &Problem{Status: 500, Title: "Internal error", Detail: "The payment was not made."})
}
