module github.com/backoff-jitter/retry/redispace

go 1.26.0

replace github.com/backoff-jitter/retry => ../

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/backoff-jitter/retry v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
