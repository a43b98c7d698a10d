package githubretry

import (
	"net/http"
	"strconv"
	"strings"
)

// Key keys a request by the quota GitHub counts it against: the host,
// the rate-limit resource its path falls in (X-RateLimit-Resource: core,
// search, code_search, graphql, dependency_snapshots,
// code_scanning_upload), and the credentials it carries, since each
// token has quotas of its own. The credentials enter as a hash, so keys
// can be shown in metrics without the token. [Options] sets it, so that
// the Pacer spreads each quota GitHub publishes on its own.
func Key(req *http.Request) string {
	if req.URL == nil {
		return ""
	}
	auth := req.Header.Get("Authorization")
	if auth == "" {
		return req.URL.Host + " " + Resource(req)
	}
	// FNV-1a (64 bits, as hash/fnv's), written out and its digits kept on
	// the stack, so that the key is the one allocation of a call.
	h := uint64(fnvOffset)
	for i := 0; i < len(auth); i++ {
		h = (h ^ uint64(auth[i])) * fnvPrime
	}
	var buf [13]byte // the longest uint64 in base 36
	return req.URL.Host + " " + Resource(req) + " " + string(strconv.AppendUint(buf[:0], h, 36))
}

// FNV-1a's 64-bit offset basis and prime (the constants of hash/fnv).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// Resource returns the rate-limit resource of GitHub's REST and GraphQL
// APIs that req counts against, as X-RateLimit-Resource names it ("core"
// for every path not given a quota of its own).
func Resource(req *http.Request) string {
	p := strings.TrimPrefix(req.URL.Path, "/api/v3") // GitHub Enterprise Server
	switch {
	case p == "/graphql" || strings.HasPrefix(p, "/api/graphql"):
		return "graphql"
	case p == "/search/code" || strings.HasPrefix(p, "/search/code/"):
		return "code_search"
	case strings.HasPrefix(p, "/search/"):
		return "search"
	case strings.HasPrefix(p, "/repos/") && strings.HasSuffix(p, "/dependency-graph/snapshots"):
		return "dependency_snapshots"
	case strings.HasPrefix(p, "/repos/") && strings.HasSuffix(p, "/code-scanning/sarifs") && req.Method == http.MethodPost:
		return "code_scanning_upload"
	}
	return "core"
}
