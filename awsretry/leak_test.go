package awsretry

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any goroutine outlives them:
// a leaked connection or timer shows up here.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
