// A payments service on Gin whose POST /payments honours the Idempotency-Key
// header with the idempotency PostgreSQL extension, through the Go library
// of clients/go (its Gin adapter, ginidem): the seed's Redis middleware
// rebuilt on the extension.  README.md beside this file explains
// it; ../conformance checks it over HTTP.
//
// Environment: HOST (127.0.0.1), PORT (3000; 0 picks a free one), the PG*
// variables of libpq (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE,
// PGSSLMODE: lib/pq reads them), POOL_SIZE (20), LEASE_SECONDS (30),
// HEARTBEAT_SECONDS (LEASE_SECONDS / 3), CARD_NETWORK_URL
// (http://127.0.0.1:4000), WAIT_FOR_DUPLICATES (true), AWAIT_RESULT_SECONDS (3).
package main

import (
	"database/sql"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	idempotency "github.com/idempotency/idempotency/clients/go"
	"github.com/idempotency/idempotency/clients/go/ginidem"
	_ "github.com/lib/pq"
)

func envFloat(name string, fallback, min float64) float64 {
	raw := os.Getenv(name)
	if raw == "" {
		return fallback
	}
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil || v < min {
		log.Fatalf("%s must be a number >= %v, not %q", name, min, raw)
	}
	return v
}

func getenv(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func main() {
	host := getenv("HOST", "127.0.0.1")
	port := int(envFloat("PORT", 3000, 0))
	poolSize := int(envFloat("POOL_SIZE", 20, 1))
	lease := envFloat("LEASE_SECONDS", 30, 1)
	beat := envFloat("HEARTBEAT_SECONDS", lease/3, 0.1)
	await := envFloat("AWAIT_RESULT_SECONDS", 3, 0)
	wait, err := strconv.ParseBool(getenv("WAIT_FOR_DUPLICATES", "true"))
	if err != nil {
		log.Fatalf("WAIT_FOR_DUPLICATES must be true or false")
	}

	// "" : connection settings from the PG* environment variables.
	db, err := sql.Open("postgres", "")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(poolSize)
	db.SetMaxIdleConns(poolSize)
	// Heartbeats have their own connections: with every request connection
	// busy, the leases of the card payments in flight must still be renewed,
	// or another instance takes the keys over and authorizes again.
	heartbeatDB, err := sql.Open("postgres", "")
	if err != nil {
		log.Fatal(err)
	}
	heartbeatDB.SetMaxOpenConns(2)

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.CustomRecovery(func(c *gin.Context, recovered any) {
		log.Printf("panic: %v", recovered)
		ginidem.WriteProblem(c, &idempotency.Problem{Status: 500, Title: "Internal error", Detail: "The request was not processed."})
	}))
	r.NoRoute(func(c *gin.Context) {
		ginidem.WriteProblem(c, &idempotency.Problem{Status: 404, Title: "Not found", Detail: "No such route."})
	})
	r.GET("/healthz", func(c *gin.Context) {
		if err := db.PingContext(c.Request.Context()); err != nil {
			ginidem.WriteProblem(c, &idempotency.Problem{Status: 503, Title: "Database unavailable", Detail: "Retry later."})
			return
		}
		c.String(http.StatusOK, "ok")
	})

	payments := &PaymentsHandler{Card: NewCardNetwork(getenv("CARD_NETWORK_URL", "http://127.0.0.1:4000"))}
	// The scope is the Merchant-Id header: the conformance suite's callers
	// pick their merchant.  In production take it from the authenticated
	// caller (idempotency.ScopeFunc, or idempotency.WithScope in the
	// authentication middleware) instead.
	idem := ginidem.Middleware(idempotency.New(db,
		idempotency.HeartbeatDB(heartbeatDB),
		idempotency.Lease(time.Duration(lease*float64(time.Second))),
		idempotency.HeartbeatEvery(time.Duration(beat*float64(time.Second))),
		idempotency.WaitForDuplicates(wait),
		idempotency.AwaitResult(time.Duration(await*float64(time.Second))),
		idempotency.ScopeFromHeader("Merchant-Id"),
		idempotency.Validate(validatePayment),
		idempotency.CommittedWhen(func(r *http.Request) bool { return r.URL.Query().Get("mode") == "card" }),
	))
	r.POST("/payments", checkMode, idem, payments.Pay)

	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}

// checkMode refuses an unknown ?mode before anything is claimed.
func checkMode(c *gin.Context) {
	if m, ok := c.GetQuery("mode"); ok && m != "card" {
		ginidem.WriteProblem(c, &idempotency.Problem{Status: 400, Title: "Unknown mode", Detail: "mode is either absent or card."})
	}
}
