module github.com/backoff-jitter/retry/examples/gobreaker

go 1.26.0

replace github.com/backoff-jitter/retry => ../../

require (
	github.com/backoff-jitter/retry v0.1.0
	github.com/sony/gobreaker/v2 v2.4.0
	go.uber.org/goleak v1.3.0
)

require github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
