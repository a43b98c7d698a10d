module github.com/backoff-jitter/retry/examples/route53

go 1.26.0

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/aws-sdk-go-v2/credentials v1.21.0
	github.com/aws/aws-sdk-go-v2/service/route53 v1.70.10
	github.com/aws/smithy-go v1.28.9
	github.com/backoff-jitter/retry v0.1.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.12 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
)

replace github.com/backoff-jitter/retry => ../../
