package redispace_test

import (
	"log"
	"net/http"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/redispace"
	"github.com/redis/go-redis/v9"
)

// fleetClient is the HTTP client of every process of the fleet: the same
// Pacer over the same Redis.
func fleetClient(redisAddr string) *http.Client {
	rdb := redis.NewClient(&redis.Options{
		Addr: redisAddr,
		// Connections opened before the first request spare the first
		// attempts a dial: a call to Redis that outlives the Pacer's
		// Timeout (50ms) is paced by the in-process Fallback instead.
		MinIdleConns: 4,
	})
	pacer := &redispace.Pacer{
		Client: rdb,
		// One account-wide quota: every host of the API counts against it.
		Key:        func(*http.Request) string { return "route53" },
		OnFallback: func(err error) { log.Printf("pacing in-process: %v", err) },
	}
	return &http.Client{Transport: retry.New(nil, retry.WithPacer(pacer))}
}

// Every process of the fleet builds its client the same way, with the
// same Redis; together they pace at the limit they learn.
func Example() {
	client := fleetClient("127.0.0.1:6379")
	_ = client // client.Get(...), from every process
}
