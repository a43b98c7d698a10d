package retry

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInvalidSettings(t *testing.T) {
	tests := []struct {
		name string
		t    *Transport
		want string
	}{
		{"negative attempts", &Transport{MaxAttempts: -1}, "MaxAttempts"},
		{"negative retry-after", &Transport{MaxRetryAfter: -time.Second}, "MaxRetryAfter"},
		{"negative buffer", &Transport{MaxBufferedBody: -1}, "MaxBufferedBody"},
		{"negative attempt timeout", &Transport{AttemptTimeout: -1}, "AttemptTimeout"},
		{"bad header", &Transport{AttemptHeader: "X Attempt"}, "AttemptHeader"},
		{"bad reset format", &Transport{RateLimitReset: 99}, "RateLimitReset"},
		{"bad backoff", &Transport{Backoff: Exponential{Base: time.Second, Cap: time.Millisecond}}, "Cap"},
		{"bad multiplier", &Transport{Backoff: Exponential{Base: time.Second, Multiplier: 0.5}}, "Multiplier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.t.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.True(t, strings.HasPrefix(err.Error(), "retry: "), err.Error())
			cc := &countingCloser{Reader: strings.NewReader("x")}
			req := mustRequest(t, "POST", "http://127.0.0.1:1/", cc)
			resp, err2 := tt.t.RoundTrip(req)
			assert.Nil(t, resp)
			assert.Equal(t, err, err2)
			assert.EqualValues(t, 1, cc.closes.Load(), "the body is closed on errors too")
		})
	}
}
