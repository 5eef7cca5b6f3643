// Package ginidem adapts the idempotency middleware to Gin: the same
// checks, claims, answers and hook as the net/http middleware
// (github.com/idempotency/idempotency/clients/go), as a gin.HandlerFunc.
//
//	idem := idempotency.New(db, idempotency.CommittedWhen(isCard))
//	r.POST("/payments", ginidem.Middleware(idem), pay)
//
// and in the handler Claimed(c) is the claim: Tx, Checkpoint, Respond.
package ginidem

import (
	"net/http"

	"github.com/gin-gonic/gin"
	idempotency "github.com/idempotency/idempotency/clients/go"
)

// Middleware is m as Gin middleware: put it before the handlers of the
// routes that take an Idempotency-Key.
func Middleware(m *idempotency.Middleware) gin.HandlerFunc {
	return func(c *gin.Context) {
		orig := c.Writer
		defer func() { c.Writer = orig }()
		m.Serve(orig, c.Request, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c.Request = r
			c.Writer = &writer{ResponseWriter: orig, w: w, status: http.StatusOK}
			c.Next()
		}))
		// the chain ran inside Serve, or must not run (the request was answered)
		c.Abort()
	}
}

// Claimed is the claim of the request (nil on a route without Middleware).
func Claimed(c *gin.Context) *idempotency.Claimed {
	return idempotency.FromContext(c.Request.Context())
}

// WriteProblem sends p and aborts the chain.
func WriteProblem(c *gin.Context, p *idempotency.Problem) {
	p.Write(c.Writer)
	c.Abort()
}

// WriteError sends what err answers (idempotency.ProblemFor) and aborts the chain.
func WriteError(c *gin.Context, err error) { WriteProblem(c, idempotency.ProblemFor(err)) }

// writer is the handlers' gin.ResponseWriter: what they write goes to the
// middleware (w), which sends it once the claim is settled.
type writer struct {
	gin.ResponseWriter // Hijack, Flush, CloseNotify, Pusher
	w                  http.ResponseWriter
	status             int
	size               int
	written            bool
}

func (g *writer) Header() http.Header { return g.w.Header() }

func (g *writer) WriteHeader(code int) {
	if code > 0 && !g.written {
		g.status = code
	}
}

func (g *writer) WriteHeaderNow() {
	if !g.written {
		g.written = true
		g.w.WriteHeader(g.status)
	}
}

func (g *writer) Write(b []byte) (int, error) {
	g.WriteHeaderNow()
	n, err := g.w.Write(b)
	g.size += n
	return n, err
}

func (g *writer) WriteString(s string) (int, error) { return g.Write([]byte(s)) }

func (g *writer) Status() int { return g.status }

func (g *writer) Size() int {
	if !g.written {
		return -1
	}
	return g.size
}

func (g *writer) Written() bool { return g.written }
