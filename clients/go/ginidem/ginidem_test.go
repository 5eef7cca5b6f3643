package ginidem

import (
	"bytes"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	idempotency "github.com/idempotency/idempotency/clients/go"
	_ "github.com/lib/pq"
)

func testDB(t *testing.T) *sql.DB {
	t.Helper()
	if os.Getenv("PGHOST") == "" {
		t.Skip("PGHOST is not set: no database for this test")
	}
	db, err := sql.Open("postgres", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("the test database: %v", err)
	}
	return db
}

func post(t *testing.T, url, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestGinPaymentReplayAndFailure(t *testing.T) {
	db := testDB(t)
	var mu sync.Mutex
	var outcomes []string
	m := idempotency.New(db, idempotency.ScopeFromHeader("Merchant-Id"), idempotency.OnOutcome(func(e idempotency.Event) {
		mu.Lock()
		defer mu.Unlock()
		outcomes = append(outcomes, string(e.Outcome))
	}))
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	var after atomic.Int32
	r.POST("/payments", Middleware(m), func(c *gin.Context) {
		claim := Claimed(c)
		if bytes.Contains(claim.Body(), []byte("refuse")) {
			WriteProblem(c, &idempotency.Problem{Status: 402, Title: "Payment refused", Detail: "card declined"})
			return
		}
		tx, err := claim.Tx()
		if err != nil {
			WriteError(c, err)
			return
		}
		var answer []byte
		err = tx.QueryRow(`INSERT INTO payments (scope, order_id, amount) VALUES ($1, 'gin', 1)
			RETURNING jsonb_build_object('payment_id', id)::text`, claim.Scope()).Scan(&answer)
		if err != nil {
			WriteError(c, err)
			return
		}
		claim.Respond(http.StatusCreated, answer)
	}, func(c *gin.Context) { after.Add(1) })
	srv := httptest.NewServer(r)
	defer srv.Close()
	key := "gin-test-" + time.Now().Format("150405.000000000")

	if resp, _ := post(t, srv.URL+"/payments", "", `{}`); resp.StatusCode != 400 {
		t.Fatalf("no key: %d", resp.StatusCode)
	}
	r1, b1 := post(t, srv.URL+"/payments", key, `{"order": "g"}`)
	r2, b2 := post(t, srv.URL+"/payments", key, `{"order":"g"}`)
	if r1.StatusCode != 201 || r2.StatusCode != 201 || r2.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(b1, b2) {
		t.Fatalf("first %d %s, replay %d %s", r1.StatusCode, b1, r2.StatusCode, b2)
	}
	// the handler's own answer is sent; the key is free again
	r3, b3 := post(t, srv.URL+"/payments", key+"-r", `{"order": "refuse"}`)
	r4, _ := post(t, srv.URL+"/payments", key+"-r", `{"order": "refuse"}`)
	if r3.StatusCode != 402 || r3.Header.Get("Content-Type") != "application/problem+json" ||
		!bytes.Contains(b3, []byte("card declined")) || r4.StatusCode != 402 || r4.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("refused: %d %s, again %d", r3.StatusCode, b3, r4.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(outcomes, " "); got != "rejected new replay new new" {
		t.Fatalf("hook: %s", got)
	}
	// the rest of the chain: after the handler that answered with Respond;
	// not after a replay, nor after a handler that aborted with its problem
	if n := after.Load(); n != 1 {
		t.Fatalf("the next handler ran %d times", n)
	}
}
