package idempotency

// The Idempotency-Key middleware.  For each request it
//  1. requires the Idempotency-Key header (400), an application/json body
//     (415) of at most MaxBody bytes (413) that is JSON (400), and whatever
//     the validator says (its problem, 422 usually), before anything is
//     claimed: a rejected request leaves no key behind;
//  2. takes the scope from the configured function (by default what
//     WithScope put into the request's context, else ''; never a header
//     unless ScopeFromHeader says so) and claims the key, in a transaction
//     the handler then works in (default), or committed at once with a
//     lease and a fencing token (CommittedWhen: work outside the database);
//  3. answers a replay with the stored status and bytes and
//     Idempotent-Replayed: true, a request in flight with 409 +
//     Retry-After, a key used with another body with 422;
//  4. otherwise runs the handler, which works in Claimed.Tx and calls
//     Claimed.Respond; the middleware then completes the key in that
//     transaction, commits, and sends the response as PostgreSQL stored it
//     (jsonb text), so the first answer and every replay are the same
//     bytes.  A handler that answers anything else has failed: the
//     transaction is rolled back (the key is free again) or the attempt is
//     recorded failed and retryable (committed claim), and the handler's
//     answer is sent.
//
// The database work runs on a context that the client's disconnect does not
// cancel: a request that went away midway still ends its claim properly.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Observed is what happened to a request, for metrics and tracing (OnOutcome).
type Observed string

const (
	// ObservedNew: claimed now; the handler ran (Event.Status is its answer's).
	ObservedNew Observed = "new"
	// ObservedReplay: the stored answer was sent.
	ObservedReplay Observed = "replay"
	// ObservedInProgress: another request holds the key (or an operator must settle it): 409.
	ObservedInProgress Observed = "in_progress"
	// ObservedMismatch: the key was used before with another body: 422.
	ObservedMismatch Observed = "mismatch"
	// ObservedReclaimed: taken over from an earlier attempt that died or failed; the handler ran.
	ObservedReclaimed Observed = "reclaimed"
	// ObservedError: the claim or the completion failed (Event.Err,
	// Event.SQLState), or the handler panicked.
	ObservedError Observed = "error"
	// ObservedRejected: refused before any claim: no or bad key, scope, content type or body.
	ObservedRejected Observed = "rejected"
)

// Event is one request's outcome, given to the OnOutcome hook once its
// answer is ready (before it is sent).
type Event struct {
	Outcome Observed
	// Status is the HTTP status sent.
	Status int
	// Elapsed is the time from the request's arrival to its answer.
	Elapsed time.Duration
	// ClaimTime is the time idem_claim took (including any wait for a
	// duplicate); 0 when there was no claim.
	ClaimTime time.Duration
	// HandlerTime is the time the handler took (New and Reclaimed only).
	HandlerTime time.Duration
	// Key is the Idempotency-Key ("" when there was none).
	Key   string
	Scope string
	// Committed: a committed claim (work outside the database).
	Committed bool
	// SQLState of a database error, and the error (ObservedError, ObservedMismatch).
	SQLState string
	Err      error
}

type config struct {
	db, heartbeatDB *sql.DB
	lease           time.Duration
	heartbeat       time.Duration
	wait            bool
	awaitResult     time.Duration
	maxBody         int64
	scope           func(*http.Request) (string, *Problem)
	validate        func(body []byte) *Problem
	committed       func(*http.Request) bool
	hook            func(Event)
	logf            func(format string, args ...any)
}

// Option configures New.
type Option func(*config)

// HeartbeatDB gives heartbeats connections of their own, so that a busy
// request pool never delays them (or the leases lapse and another instance
// takes the keys over).  Without it, heartbeats use the request pool.
func HeartbeatDB(db *sql.DB) Option { return func(c *config) { c.heartbeatDB = db } }

// Lease of a committed claim (default 30 s).
func Lease(d time.Duration) Option { return func(c *config) { c.lease = d } }

// HeartbeatEvery is how often a committed claim's lease is renewed (default lease / 3).
func HeartbeatEvery(d time.Duration) Option { return func(c *config) { c.heartbeat = d } }

// WaitForDuplicates: a duplicate of a request whose transaction is still
// open waits for it, holding a connection, and replays (true, the default),
// or gets 409 at once (false).
func WaitForDuplicates(wait bool) Option { return func(c *config) { c.wait = wait } }

// AwaitResult is how long a duplicate of a committed claim in flight waits
// for its result before 409 (default 3 s; 0: 409 at once).
func AwaitResult(d time.Duration) Option { return func(c *config) { c.awaitResult = d } }

// MaxBody is the largest body accepted (default 64 KiB; 413 above it).
func MaxBody(n int64) Option { return func(c *config) { c.maxBody = n } }

// ScopeFunc takes the scope (tenant, merchant) of a request's keys from the
// authenticated caller; a non-nil problem refuses the request before any claim.
func ScopeFunc(f func(r *http.Request) (string, *Problem)) Option {
	return func(c *config) { c.scope = f }
}

// ScopeFromHeader takes the scope from a request header (absent: "").  Only
// where the header is trusted: a caller who picks it can probe another
// scope's keys.
func ScopeFromHeader(name string) Option {
	return ScopeFunc(func(r *http.Request) (string, *Problem) { return r.Header.Get(name), nil })
}

// Validate checks a body (valid JSON already) before the claim.
func Validate(f func(body []byte) *Problem) Option { return func(c *config) { c.validate = f } }

// CommittedWhen says which requests claim committed, with a lease (work
// outside the database: a card network); the others claim in the handler's
// transaction.
func CommittedWhen(f func(r *http.Request) bool) Option { return func(c *config) { c.committed = f } }

// OnOutcome is called once per request with its outcome, status and timings.
func OnOutcome(f func(Event)) Option { return func(c *config) { c.hook = f } }

// Logf is where the middleware logs what it cannot answer (default log.Printf).
func Logf(f func(format string, args ...any)) Option { return func(c *config) { c.logf = f } }

type scopeKey struct{}

// WithScope is the context of a request whose keys belong to scope: what an
// authentication middleware in front of this one sets; the default scope
// function reads it (without it the scope is ”).
func WithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// ScopeFrom is the scope WithScope put into ctx ("" when none).
func ScopeFrom(ctx context.Context) string {
	s, _ := ctx.Value(scopeKey{}).(string)
	return s
}

// Middleware is the configured middleware (New).
type Middleware struct {
	cfg config
}

// New is the middleware on db (requests' claims and work).  Defaults: lease
// 30 s, heartbeats every lease / 3 on db, duplicates wait, await_result 3 s
// for committed claims, bodies up to 64 KiB, scope from WithScope (else
// ”), every claim in the handler's transaction, no validator, no hook.
func New(db *sql.DB, opts ...Option) *Middleware {
	cfg := config{
		db:          db,
		lease:       30 * time.Second,
		wait:        true,
		awaitResult: 3 * time.Second,
		maxBody:     64 << 10,
		scope:       func(r *http.Request) (string, *Problem) { return ScopeFrom(r.Context()), nil },
		logf:        log.Printf,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.heartbeatDB == nil {
		cfg.heartbeatDB = db
	}
	if cfg.heartbeat <= 0 {
		cfg.heartbeat = cfg.lease / 3
	}
	if cfg.heartbeat < 100*time.Millisecond {
		cfg.heartbeat = 100 * time.Millisecond
	}
	return &Middleware{cfg: cfg}
}

// Handler wraps next, the handler of the routes that take an Idempotency-Key.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.Serve(w, r, next) })
}

// ---- what the handler sees --------------------------------------------------

type claimedKey struct{}

// Claimed is the claim a handler behind the middleware holds:
// FromContext(r.Context()).
type Claimed struct {
	cfg       *config
	ctx       context.Context // not cancelled by the client's disconnect
	key       string
	scope     string
	committed bool
	outcome   Outcome
	token     int64
	body      []byte
	lost      atomic.Bool

	mu            sync.Mutex
	tx            *sql.Tx
	recoveryPoint string
	result        *result
	// settled: the handler has returned; the claim's transaction is the
	// middleware's (it completes or fails the key, commits or rolls back).
	settled bool
}

type result struct {
	code int
	body []byte
}

// FromContext is the claim of the request whose context ctx is (nil on a
// route without the middleware).
func FromContext(ctx context.Context) *Claimed {
	c, _ := ctx.Value(claimedKey{}).(*Claimed)
	return c
}

func (c *Claimed) Key() string      { return c.key }
func (c *Claimed) Scope() string    { return c.scope }
func (c *Claimed) Outcome() Outcome { return c.outcome }

// Token is the fencing token.
func (c *Claimed) Token() int64 { return c.token }

// Body is the request body (the handler's r.Body reads it too).
func (c *Claimed) Body() []byte { return c.body }

// Committed: a committed claim, with a lease (work outside the database).
func (c *Claimed) Committed() bool { return c.committed }

// Lost: a heartbeat found the claim taken over by another attempt.
func (c *Claimed) Lost() bool { return c.lost.Load() }

// RecoveryPoint is what an earlier attempt recorded with Checkpoint (only a
// Reclaimed claim has one), or what this one last recorded.
func (c *Claimed) RecoveryPoint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recoveryPoint
}

// Tx is the transaction the handler works in: the claim's own, or (committed
// claim) one begun at the first call, in which the key is then completed.
// Do not commit it, nor use it once the handler has returned: the middleware
// ends it then, and Tx returns ErrSettled.
func (c *Claimed) Tx() (*sql.Tx, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.openLocked(); err != nil {
		return nil, err
	}
	return c.txLocked()
}

// openLocked is ErrSettled once the handler has returned (c.mu held).
func (c *Claimed) openLocked() error {
	if c.settled {
		return fmt.Errorf("%w (key %q)", ErrSettled, c.key)
	}
	return nil
}

// settle gives the claim to the middleware: the handler has returned, and
// whatever kept the claim can no longer begin, write to or answer it.
func (c *Claimed) settle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settled = true
}

// txLocked is the claim's transaction, begun if need be (c.mu held); the
// middleware's own way to it, settled or not.
func (c *Claimed) txLocked() (*sql.Tx, error) {
	if c.tx == nil {
		tx, err := c.cfg.db.BeginTx(c.ctx, nil)
		if err != nil {
			return nil, wrap(err)
		}
		c.tx = tx
	}
	return c.tx, nil
}

// Checkpoint records a recovery point.  A committed claim's is committed at
// once, fenced by its token: ErrStaleToken if another attempt took the key
// over.  In default mode it is written in the claim's transaction.
// ErrSettled once the handler has returned.
func (c *Claimed) Checkpoint(point string) error {
	c.mu.Lock()
	err := c.openLocked()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if c.committed {
		err = Checkpoint(c.ctx, c.cfg.db, c.key, point, c.scope, c.token)
	} else {
		var tx *sql.Tx
		if tx, err = c.Tx(); err == nil {
			err = Checkpoint(c.ctx, tx, c.key, point, c.scope, 0)
		}
	}
	if err == nil {
		c.mu.Lock()
		c.recoveryPoint = point
		c.mu.Unlock()
	}
	return err
}

// Respond records the handler's successful answer, a JSON document: the
// middleware completes the key with it, commits, and sends it as PostgreSQL
// stored it.  The handler writes nothing itself then.  Once the handler has
// returned it is too late: the answer is logged as ignored.
func (c *Claimed) Respond(code int, json []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.settled {
		c.cfg.logf("idempotency: Claimed.Respond(%d) of %q after its handler returned: ignored", code, c.key)
		return
	}
	c.result = &result{code, json}
}

func (c *Claimed) rollback() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tx != nil {
		_ = c.tx.Rollback()
		c.tx = nil
	}
}

// ---- the request -------------------------------------------------------------

// detached has its parent's values but neither its deadline nor its cancel.
type detached struct{ parent context.Context }

func (detached) Deadline() (time.Time, bool)            { return time.Time{}, false }
func (detached) Done() <-chan struct{}                  { return nil }
func (detached) Err() error                             { return nil }
func (d detached) Value(key any) any                    { return d.parent.Value(key) }
func withoutCancel(ctx context.Context) context.Context { return detached{ctx} }

type report struct {
	cfg                  *config
	start                time.Time
	key, scope           string
	committed            bool
	claimTime, handlerTm time.Duration
}

func (rp *report) send(w http.ResponseWriter, o Observed, status int, err error, write func()) {
	if rp.cfg.hook != nil {
		rp.cfg.hook(Event{Outcome: o, Status: status, Elapsed: time.Since(rp.start), ClaimTime: rp.claimTime,
			HandlerTime: rp.handlerTm, Key: rp.key, Scope: rp.scope, Committed: rp.committed,
			SQLState: SQLState(err), Err: err})
	}
	write()
}

func (rp *report) problem(w http.ResponseWriter, o Observed, p *Problem, err error) {
	rp.send(w, o, p.Status, err, func() { p.Write(w) })
}

func (rp *report) error(w http.ResponseWriter, err error) {
	o := ObservedError
	if errors.Is(err, ErrRequestMismatch) {
		o = ObservedMismatch
	}
	rp.problem(w, o, ProblemFor(err), err)
}

// IsJSON: application/json, with or without parameters (; charset=utf-8).
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// check runs the checks before any claim: key, scope, body.
func (m *Middleware) check(w http.ResponseWriter, r *http.Request) (key, scope string, body []byte, p *Problem) {
	cfg := &m.cfg
	key = r.Header.Get("Idempotency-Key")
	if key == "" {
		return "", "", nil, &Problem{Status: 400, Title: "Idempotency-Key header missing",
			Detail: "This request needs an Idempotency-Key header."}
	}
	scope, p = cfg.scope(r)
	if p != nil {
		return key, "", nil, p
	}
	if !IsJSON(r.Header.Get("Content-Type")) {
		return key, scope, nil, &Problem{Status: 415, Title: "Unsupported Content-Type",
			Detail: "Send the request as application/json."}
	}
	tooLarge := &Problem{Status: 413, Title: "Body too large", Detail: "At most " + strconv.FormatInt(cfg.maxBody, 10) + " bytes."}
	if r.ContentLength > cfg.maxBody {
		return key, scope, nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, cfg.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return key, scope, nil, tooLarge
		}
		return key, scope, nil, &Problem{Status: 400, Title: "Body unreadable", Detail: "The body could not be read."}
	}
	if !json.Valid(body) {
		return key, scope, nil, &Problem{Status: 400, Title: "Malformed JSON", Detail: "The body is not valid JSON."}
	}
	if cfg.validate != nil {
		if p := cfg.validate(body); p != nil {
			return key, scope, nil, p
		}
	}
	return key, scope, body, nil
}

// writeStored sends a stored answer: the status and PostgreSQL's jsonb
// text (or no body).
func writeStored(w http.ResponseWriter, code int, body []byte, replayed bool) {
	if code < 100 || code > 999 {
		code = 500
	}
	if body != nil {
		w.Header().Set("Content-Type", "application/json")
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(code)
	if body != nil {
		_, _ = w.Write(body)
	}
}

// Serve handles one request: the checks, the claim, next (with the claim in
// its request's context, FromContext), the completion.  Adapters for other
// routers (ginidem) call it; net/http users take Handler.
func (m *Middleware) Serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	cfg := &m.cfg
	rp := &report{cfg: cfg, start: time.Now()}
	key, scope, body, p := m.check(w, r)
	rp.key, rp.scope = key, scope
	if p != nil {
		rp.problem(w, ObservedRejected, p, nil)
		return
	}
	committed := cfg.committed != nil && cfg.committed(r)
	rp.committed = committed
	ctx := withoutCancel(r.Context())
	c := &Claimed{cfg: cfg, ctx: ctx, key: key, scope: scope, committed: committed, body: body}

	// the claim: committed at once, or in the transaction the handler works in
	var claim *Claim
	var err error
	t0 := time.Now()
	if committed {
		claim, err = ClaimKey(ctx, cfg.db, key, body, scope,
			ClaimOptions{Lease: cfg.lease, Wait: true, AwaitResult: cfg.awaitResult})
	} else if c.tx, err = cfg.db.BeginTx(ctx, nil); err == nil {
		claim, err = ClaimKey(ctx, c.tx, key, body, scope, ClaimOptions{Lease: cfg.lease, Wait: cfg.wait})
	}
	rp.claimTime = time.Since(t0)
	if err != nil {
		c.rollback()
		rp.error(w, wrap(err))
		return
	}
	switch claim.Outcome {
	case OutcomeReplay:
		c.rollback()
		code := claim.ResponseCode
		if code == 0 {
			// no stored status: a key completed by SQL is a success; a failed
			// one (idem_fail without a code, attempts_exhausted) is not
			code = http.StatusOK
			if claim.Status == "failed" {
				code = http.StatusInternalServerError
			}
		}
		rp.send(w, ObservedReplay, code, nil, func() { writeStored(w, code, claim.Response, true) })
		return
	case OutcomeInProgress, OutcomeStale:
		c.rollback()
		detail := "Retry after the time in Retry-After."
		if claim.Outcome == OutcomeStale {
			detail = "An earlier attempt stopped midway; an operator must settle it."
		}
		rp.problem(w, ObservedInProgress, &Problem{Status: 409,
			Title: "A request with this Idempotency-Key is being processed", Detail: detail,
			RetryAfter: claim.RetryAfter}, nil)
		return
	}
	observed := ObservedNew
	if claim.Outcome == OutcomeReclaimed {
		observed = ObservedReclaimed
	}
	c.outcome, c.token, c.recoveryPoint = claim.Outcome, claim.Token, claim.RecoveryPoint

	// A committed claim's heartbeats go on until its answer or failure is
	// recorded, not only until the handler returns: the connection that
	// waits for (a busy pool) may come after the lease, and a retry would
	// take the key over.  stop may be called more than once; deferred too,
	// should anything on the way panic.
	stop := func() {}
	if committed {
		stop = c.heartbeats()
	}
	defer stop()
	buf := &bufferedWriter{header: http.Header{}}
	req := r.WithContext(context.WithValue(r.Context(), claimedKey{}, c))
	req.Body = io.NopCloser(bytes.NewReader(body))
	t1 := time.Now()
	panicked := true
	func() {
		defer func() {
			rp.handlerTm = time.Since(t1)
			c.settle() // what kept the claim is refused from now on
			if panicked {
				// the handler panicked: end the claim, then let the panic go on
				m.failed(c)
				stop()
				if rp.cfg.hook != nil {
					rp.send(w, ObservedError, 500, nil, func() {})
				}
			}
		}()
		next.ServeHTTP(buf, req)
		panicked = false
	}()

	c.mu.Lock()
	res := c.result
	c.mu.Unlock()
	if res == nil {
		// The handler failed and answered itself.
		m.failed(c)
		stop()
		if buf.status() < 400 {
			cfg.logf("idempotency: the handler answered %d without Claimed.Respond: not recorded", buf.status())
			rp.problem(w, observed, internalError(), nil)
			return
		}
		rp.send(w, observed, buf.status(), nil, func() { buf.copyTo(w) })
		return
	}
	stored, refused, err := m.complete(c, res)
	if err == nil {
		stop()
	}
	var unknown *outcomeUnknown
	switch {
	case err != nil && refused && c.committed:
		// the answer refused: the work outside the database is done, and a
		// retry taking the key over would do it again (and be refused
		// again): recorded failed, not retryable, its 500 replayed
		c.rollback()
		if ferr := Fail(c.ctx, m.cfg.db, c.key, c.scope, c.token, 500,
			[]byte(`{"error": "answer_not_storable"}`), false); ferr != nil {
			m.cfg.logf("idempotency: idem_fail of %q: %v", c.key, ferr)
		}
		stop()
		m.cfg.logf("idempotency: the answer of %q was refused: %v", c.key, err)
		rp.problem(w, ObservedError, &Problem{Status: 500, Title: "Internal error",
			Detail: "The request was processed but its answer could not be stored."}, err)
		return
	case errors.As(err, &unknown):
		// not "not processed": a client would retry with another key
		m.cfg.logf("idempotency: %v", err)
		m.failed(c)
		stop()
		rp.problem(w, ObservedError, &Problem{Status: 503, Title: "Outcome unknown", RetryAfter: 1,
			Detail: "The request may have been processed. Retry it with the same Idempotency-Key to get its result."}, err)
		return
	case err != nil:
		// as a handler that failed: rolled back, a committed claim recorded
		// failed and retryable
		m.failed(c)
		stop()
		rp.error(w, err)
		return
	}
	rp.send(w, observed, res.code, nil, func() { writeStored(w, res.code, stored, false) })
}

// failed ends a claim whose handler did not answer: rolled back (the key is
// free again), and a committed claim recorded failed, retryable: the next
// request with this key takes it over and finds the recovery point.
func (m *Middleware) failed(c *Claimed) {
	c.rollback()
	if c.committed {
		if err := Fail(c.ctx, m.cfg.db, c.key, c.scope, c.token, 0, nil, true); err != nil {
			m.cfg.logf("idempotency: idem_fail of %q: %v", c.key, err)
		}
	}
}

// complete records the handler's answer with the key in the handler's
// transaction and commits it.  refused: idem_complete refused the answer
// (class 22: a \u0000 in a string, 22P05; 54000: too large), the server's
// fault, 500, not the request's, 400.  A COMMIT whose connection was lost
// may have committed: *outcomeUnknown.
func (m *Middleware) complete(c *Claimed, res *result) (stored []byte, refused bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tx, err := c.txLocked()
	if err != nil {
		return nil, false, err
	}
	var tok int64
	if c.committed {
		tok = c.token
	}
	stored, err = Complete(c.ctx, tx, c.key, res.code, res.body, c.scope, tok)
	var e *Error
	if errors.As(err, &e) && (errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrInvalidKey) || SQLState(err) == "54000") {
		return nil, true, &Error{PQ: e.PQ}
	}
	if err == nil {
		err = wrap(tx.Commit())
		c.tx = nil
		if code := SQLState(err); err != nil && (code == "" || strings.HasPrefix(code, "08") || strings.HasPrefix(code, "57P")) {
			err = &outcomeUnknown{err}
		}
	}
	return stored, false, err
}

// outcomeUnknown: the COMMIT recording the answer failed with its
// connection lost (no SQLSTATE, class 08 or 57P): the key and the work may
// have committed, or not; a retry with the same key tells.
type outcomeUnknown struct{ err error }

func (o *outcomeUnknown) Error() string {
	return "the COMMIT may have committed: " + o.err.Error()
}
func (o *outcomeUnknown) Unwrap() error { return o.err }

// heartbeats renew a committed claim's lease until stopped, or until the
// claim turns out lost.
func (c *Claimed) heartbeats() (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(c.cfg.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				err := Heartbeat(c.ctx, c.cfg.heartbeatDB, c.key, c.scope, c.token, c.cfg.lease)
				if errors.Is(err, ErrStaleToken) || errors.Is(err, ErrNotProcessing) {
					c.cfg.logf("idempotency: heartbeat of %q: the claim was lost: %v", c.key, err)
					c.lost.Store(true)
					return
				}
				if err != nil {
					c.cfg.logf("idempotency: heartbeat of %q: %v", c.key, err)
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-finished }) }
}

// bufferedWriter keeps the handler's answer until the claim is settled.
type bufferedWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header { return b.header }

func (b *bufferedWriter) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	return b.body.Write(p)
}

// status is 0 when the handler wrote nothing.
func (b *bufferedWriter) status() int { return b.code }

func (b *bufferedWriter) copyTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	w.WriteHeader(b.code)
	_, _ = w.Write(b.body.Bytes())
}
