package idempotency

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lib/pq"
)

// testDB is the database of the tests: lib/pq's PG* variables (PGHOST,
// PGPORT, PGUSER, PGDATABASE, PGPASSWORD, PGSSLMODE), a database set up by
// examples/db/schema.sql and used as the role it granted.  Skipped only
// when PGHOST is unset.
func testDB(t *testing.T) *sql.DB {
	t.Helper()
	if os.Getenv("PGHOST") == "" {
		t.Skip("PGHOST is not set: no database for this test")
	}
	db, err := sql.Open("postgres", "")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(10)
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("the test database: %v", err)
	}
	return db
}

var keyCounter atomic.Int64

// newKey is a key no other test run used.
func newKey(t *testing.T) string {
	return fmt.Sprintf("go-test-%s-%d-%d", t.Name(), time.Now().UnixNano(), keyCounter.Add(1))
}

var bg = context.Background()

func TestClaimCompleteReplay(t *testing.T) {
	db := testDB(t)
	key := newKey(t)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	c, err := ClaimKey(bg, tx, key, []byte(`{"order":"A1","amount":3000}`), "m1", ClaimOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.Outcome != OutcomeNew || c.Token == 0 || !c.Outcome.Mine() {
		t.Fatalf("first claim: %+v", c)
	}
	stored, err := Complete(bg, tx, key, 201, []byte(`{"payment_id":7,"order":"A1"}`), "m1", 0)
	if err != nil {
		t.Fatal(err)
	}
	// PostgreSQL's jsonb text, not the bytes given
	if string(stored) != `{"order": "A1", "payment_id": 7}` {
		t.Fatalf("stored %q", stored)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// the same document, other spelling: a replay of the stored bytes
	r, err := ClaimKey(bg, db, key, []byte(`{"amount": 3000, "order": "A1"}`), "m1", ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != OutcomeReplay || r.ResponseCode != 201 || string(r.Response) != string(stored) || r.Token != 0 {
		t.Fatalf("replay: %+v", r)
	}
	// another scope: another key
	o, err := ClaimKey(bg, db, key, []byte(`{}`), "m2", ClaimOptions{Lease: time.Minute})
	if err != nil || o.Outcome != OutcomeNew {
		t.Fatalf("other scope: %+v %v", o, err)
	}
	if err := Release(bg, db, key, "m2", o.Token); err != nil {
		t.Fatal(err)
	}
}

func TestMismatchIsTyped(t *testing.T) {
	db := testDB(t)
	key := newKey(t)
	c, err := ClaimKey(bg, db, key, []byte(`{"a": 1}`), "", ClaimOptions{Lease: time.Minute})
	if err != nil || c.Outcome != OutcomeNew {
		t.Fatalf("%+v %v", c, err)
	}
	_, err = ClaimKey(bg, db, key, []byte(`{"a": 2}`), "", ClaimOptions{})
	if !errors.Is(err, ErrRequestMismatch) || HTTPStatus(err) != 422 || SQLState(err) != "IK001" {
		t.Fatalf("another body: %v (status %d)", err, HTTPStatus(err))
	}
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code != "IK001" {
		t.Fatalf("not a *pq.Error underneath: %v", err)
	}
	if p := ProblemFor(err); p.Status != 422 {
		t.Fatalf("problem %+v", p)
	}
}

func TestCommittedClaimLifecycle(t *testing.T) {
	db := testDB(t)
	key := newKey(t)
	body := []byte(`{"order": "C1"}`)
	first, err := ClaimKey(bg, db, key, body, "m", ClaimOptions{Lease: time.Minute, Wait: true})
	if err != nil || first.Outcome != OutcomeNew {
		t.Fatalf("%+v %v", first, err)
	}
	dup, err := ClaimKey(bg, db, key, body, "m", ClaimOptions{Lease: time.Minute})
	if err != nil || dup.Outcome != OutcomeInProgress || dup.RetryAfter < 1 || dup.Token != 0 {
		t.Fatalf("duplicate: %+v %v", dup, err)
	}
	if err := Heartbeat(bg, db, key, "m", first.Token, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := Checkpoint(bg, db, key, "authorizing", "m", first.Token); err != nil {
		t.Fatal(err)
	}
	err = Heartbeat(bg, db, key, "m", first.Token+1000, 0)
	if !errors.Is(err, ErrStaleToken) || HTTPStatus(err) != 409 {
		t.Fatalf("wrong token: %v", err)
	}
	if err := Fail(bg, db, key, "m", first.Token, 502, []byte(`{"error": "card"}`), true); err != nil {
		t.Fatal(err)
	}
	again, err := ClaimKey(bg, db, key, body, "m", ClaimOptions{Lease: time.Minute})
	if err != nil || again.Outcome != OutcomeReclaimed || again.RecoveryPoint != "authorizing" || again.Token == first.Token {
		t.Fatalf("after a retryable failure: %+v %v", again, err)
	}
	// the first attempt is fenced off
	_, err = Complete(bg, db, key, 201, []byte(`{}`), "m", first.Token)
	if !errors.Is(err, ErrStaleToken) {
		t.Fatalf("old token: %v", err)
	}
	if _, err := Complete(bg, db, key, 201, nil, "m", again.Token); err != nil {
		t.Fatal(err)
	}
	_, err = Complete(bg, db, key, 201, nil, "m", again.Token)
	if !errors.Is(err, ErrNotProcessing) {
		t.Fatalf("completed twice: %v", err)
	}
	r, err := ClaimKey(bg, db, key, body, "m", ClaimOptions{})
	if err != nil || r.Outcome != OutcomeReplay || r.ResponseCode != 201 || r.Response != nil {
		t.Fatalf("replay without a body: %+v %v", r, err)
	}
}

func TestReleaseAndNotFound(t *testing.T) {
	db := testDB(t)
	key := newKey(t)
	c, err := ClaimKey(bg, db, key, nil, "", ClaimOptions{Lease: time.Minute})
	if err != nil || c.Outcome != OutcomeNew {
		t.Fatalf("%+v %v", c, err)
	}
	if err := Release(bg, db, key, "", c.Token); err != nil {
		t.Fatal(err)
	}
	err = Checkpoint(bg, db, key, "x", "", c.Token)
	if !errors.Is(err, ErrKeyNotFound) || HTTPStatus(err) != 404 {
		t.Fatalf("released key: %v", err)
	}
	c2, err := ClaimKey(bg, db, key, nil, "", ClaimOptions{Lease: time.Minute})
	if err != nil || c2.Outcome != OutcomeNew {
		t.Fatalf("after release: %+v %v", c2, err)
	}
	if err := Release(bg, db, key, "", c2.Token); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidInputIs400(t *testing.T) {
	db := testDB(t)
	_, err := ClaimKey(bg, db, "", nil, "", ClaimOptions{})
	if !errors.Is(err, ErrInvalidKey) || HTTPStatus(err) != 400 {
		t.Fatalf("empty key: %v", err)
	}
	_, err = ClaimKey(bg, db, newKey(t), []byte(`{"a": "\u0000"}`), "", ClaimOptions{})
	if !errors.Is(err, ErrInvalidRequest) || HTTPStatus(err) != 400 {
		t.Fatalf("\\u0000: %v", err)
	}
	if p := ProblemFor(err); p.Status != 400 || p.Title != "Invalid request" {
		t.Fatalf("problem %+v", p)
	}
}

// waitForClaimWaiting waits until another session of this role runs an
// idem_claim that waits (for a duplicate in flight).
func waitForClaimWaiting(t *testing.T, db *sql.DB) {
	t.Helper()
	for i := 0; ; i++ {
		var n int
		err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND datname = current_database() AND state = 'active' AND query LIKE '%idem_claim(%'
			  AND wait_event IS NOT NULL`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if i > 3000 {
			t.Fatal("no idem_claim began to wait")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAwaitResultReplays(t *testing.T) {
	db := testDB(t)
	key := newKey(t)
	body := []byte(`{"order": "W"}`)
	first, err := ClaimKey(bg, db, key, body, "", ClaimOptions{Lease: time.Minute})
	if err != nil || first.Outcome != OutcomeNew {
		t.Fatalf("%+v %v", first, err)
	}
	type answer struct {
		c   *Claim
		err error
	}
	done := make(chan answer, 1)
	go func() {
		c, err := ClaimKey(bg, db, key, body, "", ClaimOptions{Wait: true, AwaitResult: 5 * time.Minute})
		done <- answer{c, err}
	}()
	waitForClaimWaiting(t, db)
	stored, err := Complete(bg, db, key, 201, []byte(`{"id":1}`), "", first.Token)
	if err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.c.Outcome != OutcomeReplay || string(a.c.Response) != string(stored) {
		t.Fatalf("the waiting duplicate: %+v %v", a.c, a.err)
	}
}

func TestSQLStates(t *testing.T) {
	cases := map[string]struct {
		kind   error
		status int
	}{
		"IK001": {ErrRequestMismatch, 422}, "IK002": {ErrStaleToken, 409}, "IK003": {ErrNotProcessing, 409},
		"IK004": {ErrKeyNotFound, 404}, "IK005": {ErrTokenRequired, 500}, "IK006": {ErrRowSecurityOff, 503},
		"22004": {ErrInvalidKey, 400}, "22023": {ErrInvalidKey, 400}, "22P05": {ErrInvalidRequest, 400},
		"22003": {ErrInvalidRequest, 400}, "25006": {ErrReadOnly, 503}, "42501": {nil, 500}, "40001": {nil, 500},
	}
	for code, want := range cases {
		err := wrap(fmt.Errorf("context: %w", &pq.Error{Code: pq.ErrorCode(code), Message: "m"}))
		var e *Error
		if !errors.As(err, &e) || e.Kind != want.kind || e.Code() != code {
			t.Errorf("%s: %v", code, err)
		}
		if want.kind != nil && !errors.Is(err, want.kind) {
			t.Errorf("%s: not errors.Is its kind", code)
		}
		if got := HTTPStatus(err); got != want.status {
			t.Errorf("%s: status %d, want %d", code, got, want.status)
		}
	}
	if HTTPStatus(errors.New("connection refused")) != 500 || SQLState(errors.New("x")) != "" {
		t.Error("a non-database error")
	}
}
