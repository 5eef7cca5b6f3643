package idempotency

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hookLog records the hook's events.
type hookLog struct {
	mu     sync.Mutex
	events []Event
}

func (h *hookLog) record(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

func (h *hookLog) outcomes() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var s []string
	for _, e := range h.events {
		s = append(s, string(e.Outcome)+":"+http.StatusText(e.Status))
	}
	return strings.Join(s, " ")
}

// pay is a payment handler: the payment and the key in the claim's transaction.
func pay(w http.ResponseWriter, r *http.Request) {
	c := FromContext(r.Context())
	var p struct {
		Order  string `json:"order"`
		Amount int64  `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		(&Problem{Status: 422, Title: "Invalid payment", Detail: err.Error()}).Write(w)
		return
	}
	tx, err := c.Tx()
	if err != nil {
		WriteError(w, err)
		return
	}
	var answer []byte
	err = tx.QueryRowContext(r.Context(), `INSERT INTO payments (scope, order_id, amount) VALUES ($1, $2, $3)
		RETURNING jsonb_build_object('payment_id', id, 'order', order_id, 'amount', amount)::text`,
		c.Scope(), p.Order, p.Amount).Scan(&answer)
	if err != nil {
		WriteError(w, err)
		return
	}
	c.Respond(http.StatusCreated, answer)
}

func post(t *testing.T, url, key string, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func countPayments(t *testing.T, db *sql.DB, order string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM payments WHERE order_id = $1", order).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func countKeys(t *testing.T, db *sql.DB, key string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM idempotency_keys WHERE key = $1", key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMiddlewareFirstAnswerAndReplays(t *testing.T) {
	db := testDB(t)
	hooks := &hookLog{}
	srv := httptest.NewServer(New(db, OnOutcome(hooks.record)).Handler(http.HandlerFunc(pay)))
	defer srv.Close()
	key, order := newKey(t), newKey(t)
	body := `{"order":"` + order + `","amount":3000}`
	r1, b1 := post(t, srv.URL, key, body)
	if r1.StatusCode != 201 || r1.Header.Get("Content-Type") != "application/json" || r1.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %v %s", r1.StatusCode, r1.Header, b1)
	}
	if !bytes.Contains(b1, []byte(`"amount": 3000`)) { // PostgreSQL's jsonb text
		t.Fatalf("first body %s", b1)
	}
	r2, b2 := post(t, srv.URL, key, `{ "amount": 3000, "order": "`+order+`" }`)
	if r2.StatusCode != 201 || r2.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(b1, b2) {
		t.Fatalf("replay: %d %v %s", r2.StatusCode, r2.Header, b2)
	}
	r3, b3 := post(t, srv.URL, key, `{"order":"`+order+`","amount":3001}`)
	if r3.StatusCode != 422 || r3.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("another body: %d %s", r3.StatusCode, b3)
	}
	if n := countPayments(t, db, order); n != 1 {
		t.Fatalf("%d payments", n)
	}
	if got := hooks.outcomes(); got != "new:Created replay:Created mismatch:Unprocessable Entity" {
		t.Fatalf("hook: %s", got)
	}
	e := hooks.events[2]
	if e.SQLState != "IK001" || e.Key != key || e.Elapsed <= 0 || e.ClaimTime <= 0 {
		t.Fatalf("mismatch event %+v", e)
	}
	if e := hooks.events[0]; e.HandlerTime <= 0 || e.Committed {
		t.Fatalf("new event %+v", e)
	}
}

func TestMiddlewareRejectsBeforeClaiming(t *testing.T) {
	db := testDB(t)
	hooks := &hookLog{}
	m := New(db, OnOutcome(hooks.record), MaxBody(100), Validate(func(b []byte) *Problem {
		if bytes.Contains(b, []byte("bad")) {
			return &Problem{Status: 422, Title: "Invalid payment", Detail: "bad"}
		}
		return nil
	}))
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(pay)))
	defer srv.Close()
	key := newKey(t)
	cases := []struct {
		key, body, ctype string
		status           int
	}{
		{"", `{"order":"x","amount":1}`, "application/json", 400},
		{key, `{"order":"x","amount":1}`, "text/plain", 415},
		{key, `{"order":"` + strings.Repeat("x", 200) + `"}`, "application/json", 413},
		{key, `{"order":`, "application/json", 400},
		{key, `{"order":"bad","amount":1}`, "application/json; charset=utf-8", 422},
		{key, `{"order":"\u0000","amount":1}`, "application/json", 400}, // refused by jsonb: claims nothing
	}
	for _, c := range cases {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(c.body))
		req.Header.Set("Content-Type", c.ctype)
		if c.key != "" {
			req.Header.Set("Idempotency-Key", c.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p map[string]any
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal(b, &p) != nil || p["status"] != float64(c.status) || p["type"] != "about:blank" {
			t.Errorf("%q %q: %d %s", c.ctype, c.body, resp.StatusCode, b)
		}
	}
	if n := countKeys(t, db, key); n != 0 {
		t.Fatalf("%d keys left claimed", n)
	}
	want := "rejected:Bad Request rejected:Unsupported Media Type rejected:Request Entity Too Large " +
		"rejected:Bad Request rejected:Unprocessable Entity error:Bad Request"
	if got := hooks.outcomes(); got != want {
		t.Fatalf("hook: %s", got)
	}
}

func TestMiddlewareScope(t *testing.T) {
	db := testDB(t)
	// the default: the scope the authentication in front put into the context
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(WithScope(r.Context(), r.Header.Get("X-Test-Caller"))))
		})
	}
	byContext := httptest.NewServer(auth(New(db).Handler(http.HandlerFunc(pay))))
	defer byContext.Close()
	key, order := newKey(t), newKey(t)
	body := `{"order":"` + order + `","amount":5}`
	a, _ := post(t, byContext.URL, key, body, "X-Test-Caller", "merchant-a")
	b, _ := post(t, byContext.URL, key, body, "X-Test-Caller", "merchant-b")
	if a.StatusCode != 201 || b.StatusCode != 201 || b.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("two callers, one key: %d %d", a.StatusCode, b.StatusCode)
	}
	// Merchant-Id is not read unless configured: the same (empty) scope
	key2 := newKey(t)
	c1, _ := post(t, byContext.URL, key2, body, "Merchant-Id", "m1")
	c2, _ := post(t, byContext.URL, key2, body, "Merchant-Id", "m2")
	if c1.StatusCode != 201 || c2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("Merchant-Id read without being configured: %d %v", c2.StatusCode, c2.Header)
	}
	// configured: the header is the scope
	byHeader := httptest.NewServer(New(db, ScopeFromHeader("Merchant-Id")).Handler(http.HandlerFunc(pay)))
	defer byHeader.Close()
	key3 := newKey(t)
	d1, _ := post(t, byHeader.URL, key3, body, "Merchant-Id", "m1")
	d2, _ := post(t, byHeader.URL, key3, body, "Merchant-Id", "m2")
	if d1.StatusCode != 201 || d2.StatusCode != 201 || d2.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("scope from the header: %d %d", d1.StatusCode, d2.StatusCode)
	}
	if n := countPayments(t, db, order); n != 5 {
		t.Fatalf("%d payments, want 5", n)
	}
	// a scope function's problem refuses the request
	refusing := httptest.NewServer(New(db, ScopeFunc(func(r *http.Request) (string, *Problem) {
		return "", &Problem{Status: 401, Title: "Unauthenticated", Detail: "no caller"}
	})).Handler(http.HandlerFunc(pay)))
	defer refusing.Close()
	if r, _ := post(t, refusing.URL, newKey(t), body); r.StatusCode != 401 {
		t.Fatalf("refused scope: %d", r.StatusCode)
	}
}

func TestMiddlewareInProgressNoWait(t *testing.T) {
	db := testDB(t)
	hooks := &hookLog{}
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(string(FromContext(r.Context()).Body()), "slow") {
			close(entered)
			<-release
		}
		pay(w, r)
	})
	srv := httptest.NewServer(New(db, WaitForDuplicates(false), OnOutcome(hooks.record)).Handler(h))
	defer srv.Close()
	key, order := newKey(t), newKey(t)
	body := `{"order":"` + order + `","amount":1,"note":"slow"}`
	first := make(chan *http.Response, 1)
	go func() {
		r, _ := post(t, srv.URL, key, body)
		first <- r
	}()
	<-entered
	r, b := post(t, srv.URL, key, body)
	if r.StatusCode != 409 || r.Header.Get("Retry-After") == "" || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("duplicate in flight: %d %v %s", r.StatusCode, r.Header, b)
	}
	close(release)
	if f := <-first; f.StatusCode != 201 {
		t.Fatalf("first: %d", f.StatusCode)
	}
	if got := hooks.outcomes(); got != "in_progress:Conflict new:Created" {
		t.Fatalf("hook: %s", got)
	}
}

func TestMiddlewareHandlerFailureFreesTheKey(t *testing.T) {
	db := testDB(t)
	var fail atomic.Bool
	fail.Store(true)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			tx, err := FromContext(r.Context()).Tx()
			if err != nil {
				t.Error(err)
			}
			// written, then rolled back with the claim
			if _, err := tx.Exec("INSERT INTO payments (scope, order_id, amount) VALUES ('', 'never', 1)"); err != nil {
				t.Error(err)
			}
			w.Header().Set("X-Handler", "yes")
			w.WriteHeader(200) // an answer that was not recorded: 500
			return
		}
		pay(w, r)
	})
	srv := httptest.NewServer(New(db).Handler(h))
	defer srv.Close()
	key, order := newKey(t), newKey(t)
	body := `{"order":"` + order + `","amount":1}`
	r, b := post(t, srv.URL, key, body)
	if r.StatusCode != 500 || r.Header.Get("X-Handler") != "" || bytes.Contains(b, []byte("INSERT")) {
		t.Fatalf("unrecorded answer: %d %v %s", r.StatusCode, r.Header, b)
	}
	if n := countKeys(t, db, key); n != 0 {
		t.Fatalf("the key stayed claimed")
	}
	fail.Store(false)
	if r, _ := post(t, srv.URL, key, body); r.StatusCode != 201 || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry: %d", r.StatusCode)
	}
}

func TestMiddlewareCommittedRecoveryAndFailure(t *testing.T) {
	db := testDB(t)
	hooks := &hookLog{}
	var mu sync.Mutex
	var points []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := FromContext(r.Context())
		mu.Lock()
		points = append(points, c.RecoveryPoint())
		attempt := len(points)
		mu.Unlock()
		if !c.Committed() || c.Token() == 0 {
			t.Errorf("not a committed claim: %v %d", c.Committed(), c.Token())
		}
		if attempt == 1 {
			if err := c.Checkpoint("authorizing"); err != nil {
				t.Error(err)
			}
			(&Problem{Status: 502, Title: "Card network unavailable", Detail: "retry", RetryAfter: 1}).Write(w)
			return
		}
		if c.Outcome() != OutcomeReclaimed {
			t.Errorf("second attempt: %s", c.Outcome())
		}
		pay(w, r)
	})
	m := New(db, CommittedWhen(func(r *http.Request) bool { return r.URL.Query().Get("mode") == "card" }),
		OnOutcome(hooks.record))
	srv := httptest.NewServer(m.Handler(h))
	defer srv.Close()
	key, order := newKey(t), newKey(t)
	body := `{"order":"` + order + `","amount":9}`
	r1, b1 := post(t, srv.URL+"?mode=card", key, body)
	if r1.StatusCode != 502 || r1.Header.Get("Retry-After") != "1" || !bytes.Contains(b1, []byte("Card network")) {
		t.Fatalf("failed attempt: %d %s", r1.StatusCode, b1)
	}
	r2, b2 := post(t, srv.URL+"?mode=card", key, body)
	r3, b3 := post(t, srv.URL+"?mode=card", key, body)
	if r2.StatusCode != 201 || r3.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(b2, b3) {
		t.Fatalf("retries: %d %d %s %s", r2.StatusCode, r3.StatusCode, b2, b3)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(points, ",") != ",authorizing" {
		t.Fatalf("recovery points seen: %q", points)
	}
	if got := hooks.outcomes(); got != "new:Bad Gateway reclaimed:Created replay:Created" {
		t.Fatalf("hook: %s", got)
	}
	if !hooks.events[1].Committed {
		t.Fatal("the event does not say committed")
	}
}

func TestMiddlewareHeartbeatsRenewTheLease(t *testing.T) {
	db := testDB(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := FromContext(r.Context())
		var first, now time.Time
		q := "SELECT locked_until FROM idempotency_keys WHERE key = $1"
		if err := db.QueryRow(q, c.Key()).Scan(&first); err != nil {
			t.Error(err)
			return
		}
		// until a heartbeat moved the lease on (the test fails, not hangs, without one)
		for i := 0; now.Before(first.Add(time.Millisecond)); i++ {
			if i > 600 {
				t.Error("no heartbeat renewed the lease")
				return
			}
			time.Sleep(50 * time.Millisecond)
			if err := db.QueryRow(q, c.Key()).Scan(&now); err != nil {
				t.Error(err)
				return
			}
		}
		if c.Lost() {
			t.Error("lost")
		}
		pay(w, r)
	})
	m := New(db, CommittedWhen(func(*http.Request) bool { return true }), Lease(time.Minute),
		HeartbeatEvery(100*time.Millisecond), HeartbeatDB(db))
	srv := httptest.NewServer(m.Handler(h))
	defer srv.Close()
	if r, b := post(t, srv.URL, newKey(t), `{"order":"`+newKey(t)+`","amount":1}`); r.StatusCode != 201 {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
}

func TestMiddlewareAwaitResult(t *testing.T) {
	db := testDB(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(entered); <-release })
		pay(w, r)
	})
	m := New(db, CommittedWhen(func(*http.Request) bool { return true }), AwaitResult(5*time.Minute))
	srv := httptest.NewServer(m.Handler(h))
	defer srv.Close()
	key, body := newKey(t), `{"order":"`+newKey(t)+`","amount":2}`
	type answer struct {
		r *http.Response
		b []byte
	}
	first, second := make(chan answer, 1), make(chan answer, 1)
	go func() { r, b := post(t, srv.URL, key, body); first <- answer{r, b} }()
	<-entered
	go func() { r, b := post(t, srv.URL, key, body); second <- answer{r, b} }()
	waitForClaimWaiting(t, db)
	close(release)
	a, b := <-first, <-second
	if a.r.StatusCode != 201 || b.r.StatusCode != 201 || b.r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(a.b, b.b) {
		t.Fatalf("first %d %s, the waiting retry %d %s", a.r.StatusCode, a.b, b.r.StatusCode, b.b)
	}
}

// A claim kept past its handler (handed to a goroutine of its own, say) is
// refused once the middleware has settled it: Tx would begin a transaction
// nobody ends (a leaked connection, work that vanishes), Checkpoint would
// write after the key was completed, Respond would record an answer nobody
// reads.
func TestMiddlewareKeptClaimIsSettled(t *testing.T) {
	db := testDB(t)
	var logMu sync.Mutex
	var logged []string
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		logged = append(logged, fmt.Sprintf(format, args...))
	}
	// written by the server's goroutine, read by the test's
	var keptClaim atomic.Pointer[Claimed]
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keptClaim.Store(FromContext(r.Context()))
		pay(w, r)
	})
	srv := httptest.NewServer(New(db, Logf(logf)).Handler(h))
	defer srv.Close()
	key, order := newKey(t), newKey(t)
	body := `{"order":"` + order + `","amount":4}`
	r1, b1 := post(t, srv.URL, key, body)
	kept := keptClaim.Load()
	if r1.StatusCode != 201 || kept == nil {
		t.Fatalf("first: %d %s (claim kept: %v)", r1.StatusCode, b1, kept != nil)
	}
	if tx, err := kept.Tx(); !errors.Is(err, ErrSettled) {
		if tx != nil {
			_ = tx.Rollback()
		}
		t.Errorf("Tx of a settled claim: %v, want ErrSettled", err)
	}
	if err := kept.Checkpoint("late"); !errors.Is(err, ErrSettled) {
		t.Errorf("Checkpoint of a settled claim: %v, want ErrSettled", err)
	}
	kept.Respond(200, []byte(`{"late":true}`))
	logMu.Lock()
	if len(logged) != 1 || !strings.Contains(logged[0], "Respond(200)") || !strings.Contains(logged[0], key) {
		t.Errorf("Respond of a settled claim logged %q", logged)
	}
	logMu.Unlock()
	// the key is as the middleware completed it: the first answer, no recovery point
	r2, b2 := post(t, srv.URL, key, body)
	if r2.StatusCode != 201 || r2.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(b1, b2) {
		t.Fatalf("replay: %d %s, first %s", r2.StatusCode, b2, b1)
	}
	var point sql.NullString
	if err := db.QueryRow("SELECT recovery_point FROM idempotency_keys WHERE key = $1", key).Scan(&point); err != nil {
		t.Fatal(err)
	}
	if point.Valid {
		t.Fatalf("recovery point %q written after the key was completed", point.String)
	}
}

func TestIsJSON(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "application/json; charset=utf-8": true, "Application/JSON;charset=UTF-8": true,
		"text/plain": false, "application/problem+json": false, "application/jsonx": false, "": false,
	} {
		if IsJSON(ct) != want {
			t.Errorf("%q", ct)
		}
	}
}

// A key stored without a status is replayed 500 when it failed (idem_fail
// without a code; attempts_exhausted after it), 200 when completed (by SQL).
func TestMiddlewareReplayWithoutStatus(t *testing.T) {
	db := testDB(t)
	hooks := &hookLog{}
	srv := httptest.NewServer(New(db, OnOutcome(hooks.record)).Handler(http.HandlerFunc(pay)))
	defer srv.Close()
	body := `{"order":"nc","amount":3}`
	failed, done := newKey(t), newKey(t)
	var token int64
	if err := db.QueryRow(`SELECT token FROM idem_claim($1, $2::jsonb, '', lease => '30 s')`, failed, body).Scan(&token); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`SELECT idem_fail($1, '', $2, NULL, NULL, false)`, failed, token); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`SELECT idem_claim($1, $2::jsonb), idem_complete($1, NULL, NULL)`, done, body); err != nil {
		t.Fatal(err)
	}
	r1, b1 := post(t, srv.URL, failed, body)
	if r1.StatusCode != 500 || r1.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("failed key: %d %v %s", r1.StatusCode, r1.Header, b1)
	}
	r2, b2 := post(t, srv.URL, done, body)
	if r2.StatusCode != 200 || r2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("completed key: %d %v %s", r2.StatusCode, r2.Header, b2)
	}
	if got := hooks.outcomes(); got != "replay:Internal Server Error replay:OK" {
		t.Fatalf("hook: %s", got)
	}
}

// An answer idem_complete refuses (\u0000 in a string: 22P05) is the
// server's fault: 500, not 400.  In a transaction the claim is rolled back
// (the key free); a committed claim's work outside the database is done,
// so it is recorded failed, not retryable: the retry replays the 500 and
// does not run the handler (charge) again.
func TestMiddlewareRefusedAnswerIs500(t *testing.T) {
	db := testDB(t)
	hooks := &hookLog{}
	var runs atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		FromContext(r.Context()).Respond(http.StatusCreated, []byte(`{"note":"a\u0000b"}`))
	})
	m := New(db, CommittedWhen(func(r *http.Request) bool { return r.URL.Query().Get("mode") == "card" }),
		OnOutcome(hooks.record), Logf(func(string, ...any) {}))
	srv := httptest.NewServer(m.Handler(h))
	defer srv.Close()
	for _, mode := range []string{"tx", "card"} {
		key := newKey(t)
		resp, b := post(t, srv.URL+"?mode="+mode, key, `{"order":"nul","amount":1}`)
		var p map[string]any
		if resp.StatusCode != 500 || json.Unmarshal(b, &p) != nil || p["status"] != float64(500) {
			t.Fatalf("%s: %d %s", mode, resp.StatusCode, b)
		}
		var status sql.NullString
		var code sql.NullInt64
		err := db.QueryRow("SELECT status, response_code FROM idempotency_keys WHERE key = $1", key).Scan(&status, &code)
		if mode == "tx" && err != sql.ErrNoRows {
			t.Fatalf("tx: the key is left: %v %v", status, err)
		}
		if mode == "card" {
			if err != nil || status.String != "failed" || code.Int64 != 500 {
				t.Fatalf("card: the key is %v %v (%v), not failed 500", status, code, err)
			}
			if p["detail"] != "The request was processed but its answer could not be stored." {
				t.Fatalf("card: %s", b)
			}
			resp, b = post(t, srv.URL+"?mode="+mode, key, `{"order":"nul","amount":1}`)
			if resp.StatusCode != 500 || resp.Header.Get("Idempotent-Replayed") != "true" ||
				string(b) != `{"error": "answer_not_storable"}` {
				t.Fatalf("card retry: %d %q %s", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), b)
			}
		}
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the handler ran %d times, not once per key", n)
	}
	if got := hooks.outcomes(); got != "error:Internal Server Error error:Internal Server Error replay:Internal Server Error" {
		t.Fatalf("hook: %s", got)
	}
	if e := hooks.events[0]; e.SQLState != "22P05" {
		t.Fatalf("event %+v", e)
	}
}

// A committed claim's heartbeats go on until its answer is recorded: with
// the request pool busy past the lease while the answer waits for a
// connection, another instance's retry gets 409, not the key (before: the
// lease lapsed, the retry took the key over and charged again).
func TestMiddlewareHeartbeatsUntilRecorded(t *testing.T) {
	busy := testDB(t)
	busy.SetMaxOpenConns(1)
	beats := testDB(t)
	var runs atomic.Int64
	arrived := make(chan struct{}, 2)
	goOn := make(chan struct{})
	returning := make(chan struct{}, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1) // the card network charged
		arrived <- struct{}{}
		<-goOn
		FromContext(r.Context()).Respond(http.StatusCreated, []byte(fmt.Sprintf(`{"charge": %d}`, n)))
		returning <- struct{}{}
	})
	opts := []Option{CommittedWhen(func(*http.Request) bool { return true }), Lease(3 * time.Second),
		HeartbeatEvery(250 * time.Millisecond), AwaitResult(0), Logf(func(string, ...any) {}),
		ScopeFunc(func(*http.Request) (string, *Problem) { return "go-busy-respond", nil })}
	a := httptest.NewServer(New(busy, append(opts, HeartbeatDB(beats))...).Handler(h))
	defer a.Close()
	b := httptest.NewServer(New(testDB(t), opts...).Handler(h))
	defer b.Close()
	key := newKey(t)
	body := `{"order":"busy","amount":9}`
	type answer struct {
		resp *http.Response
		body []byte
	}
	first := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", a.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- answer{nil, []byte(err.Error())}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		first <- answer{resp, b}
	}()
	<-arrived
	held, err := busy.Conn(context.Background()) // instance A's pool, busy
	if err != nil {
		t.Fatal(err)
	}
	close(goOn)
	<-returning
	time.Sleep(4500 * time.Millisecond) // past the lease while the answer waits for A's pool
	during, duringBody := post(t, b.URL, key, body)
	held.Close()
	got := <-first
	if during.StatusCode != 409 {
		t.Fatalf("the retry during the wait: %d %s", during.StatusCode, duringBody)
	}
	if got.resp == nil || got.resp.StatusCode != 201 {
		t.Fatalf("the first: %d %s", got.resp.StatusCode, got.body)
	}
	resp, again := post(t, b.URL, key, body)
	if resp.StatusCode != 201 || string(again) != string(got.body) {
		t.Fatalf("the retry after: %d %s", resp.StatusCode, again)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
}

// commitCutter is a TCP proxy to the test database (PGHOST, PGPORT: TCP;
// no SSL) that, once armed, sends the next COMMIT on and, when the server
// answers it (it has committed), cuts the client's connection instead: a
// COMMIT whose outcome the client cannot know.
type commitCutter struct {
	ln    net.Listener
	armed atomic.Bool
	cuts  atomic.Int64
}

func newCommitCutter(t *testing.T) *commitCutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitCutter{ln: ln}
	t.Cleanup(func() { ln.Close() })
	port := os.Getenv("PGPORT")
	if port == "" {
		port = "5432"
	}
	target := net.JoinHostPort(os.Getenv("PGHOST"), port)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, target)
		}
	}()
	return p
}

func (p *commitCutter) serve(c net.Conn, target string) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	var sent atomic.Bool // a COMMIT sent, to be cut
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := s.Read(buf)
			if n > 0 && sent.Load() {
				p.cuts.Add(1)
				c.Close()
				return
			}
			if n > 0 {
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				c.Close()
				return
			}
		}
	}()
	r := bufio.NewReader(c)
	started := false
	for {
		head := 4
		if started {
			head = 5
		}
		h, err := r.Peek(head)
		if err != nil {
			return
		}
		n := head - 4 + int(binary.BigEndian.Uint32(h[head-4:]))
		msg := make([]byte, n)
		if _, err := io.ReadFull(r, msg); err != nil {
			return
		}
		if started && msg[0] == 'Q' && bytes.HasPrefix(bytes.ToUpper(msg[5:]), []byte("COMMIT")) && p.armed.CompareAndSwap(true, false) {
			sent.Store(true)
		}
		started = true
		if _, err := s.Write(msg); err != nil {
			return
		}
	}
}

// A COMMIT whose outcome is unknown (the link cut after the server
// committed) is answered 503, retry with the same key, not 500 "not
// processed" (a client would retry with another key and pay twice); the
// retry replays what committed.
func TestMiddlewareCommitOutcomeUnknown(t *testing.T) {
	db := testDB(t)
	proxy := newCommitCutter(t)
	_, port, _ := net.SplitHostPort(proxy.ln.Addr().String())
	cut, err := sql.Open("postgres", "host=127.0.0.1 port="+port)
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	hooks := &hookLog{}
	srv := httptest.NewServer(New(cut, OnOutcome(hooks.record), Logf(func(string, ...any) {})).Handler(http.HandlerFunc(pay)))
	defer srv.Close()
	key := newKey(t)
	order := "cut-" + key
	body := `{"order":"` + order + `","amount":12}`
	proxy.armed.Store(true)
	resp, b := post(t, srv.URL, key, body)
	var p map[string]any
	if resp.StatusCode != 503 || json.Unmarshal(b, &p) != nil || p["title"] != "Outcome unknown" ||
		resp.Header.Get("Retry-After") != "1" || proxy.cuts.Load() != 1 {
		t.Fatalf("the first: %d %q %s (cuts %d)", resp.StatusCode, resp.Header.Get("Retry-After"), b, proxy.cuts.Load())
	}
	var status string
	if err := db.QueryRow("SELECT status FROM idempotency_keys WHERE key = $1", key).Scan(&status); err != nil || status != "completed" {
		t.Fatalf("the key: %q %v", status, err)
	}
	resp, b = post(t, srv.URL, key, body)
	if resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the retry: %d %s", resp.StatusCode, b)
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM payments WHERE order_id = $1", order).Scan(&n); err != nil || n != 1 {
		t.Fatalf("payments: %d %v", n, err)
	}
	if got := hooks.outcomes(); got != "error:Service Unavailable replay:Created" {
		t.Fatalf("hook: %s", got)
	}
}
