module github.com/backoff-jitter/retry/examples/github

go 1.26.0

replace github.com/backoff-jitter/retry => ../../

require (
	github.com/backoff-jitter/retry v0.1.0
	github.com/google/go-github/v75 v75.0.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/google/go-querystring v1.1.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
)
