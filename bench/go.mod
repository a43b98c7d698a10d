module github.com/backoff-jitter/retry/bench

go 1.26.0

replace github.com/backoff-jitter/retry => ../

replace github.com/backoff-jitter/retry/redispace => ../redispace

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/aws-sdk-go-v2/credentials v1.21.0
	github.com/aws/aws-sdk-go-v2/service/route53 v1.70.10
	github.com/aws/smithy-go v1.28.9
	github.com/backoff-jitter/retry v0.1.0
	github.com/backoff-jitter/retry/redispace v0.1.0
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/gofri/go-github-ratelimit/v2 v2.0.2
	github.com/hashicorp/go-cleanhttp v0.5.2
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.16.0
)

require (
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.12 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
