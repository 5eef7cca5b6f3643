module github.com/idempotency/idempotency/clients/go

go 1.19

// The versions Debian 12 (bookworm) packages (golang-github-lib-pq-dev,
// golang-github-gin-gonic-gin-dev): the test command builds this module in
// GOPATH mode over /usr/share/gocode, offline (README.md).  Gin is needed
// only by the ginidem subpackage.
require (
	github.com/gin-gonic/gin v1.8.1
	github.com/lib/pq v1.10.7
)
