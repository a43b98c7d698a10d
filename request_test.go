package retry

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReplaySafe(t *testing.T) {
	tests := []struct {
		method string
		header http.Header
		want   bool
	}{
		{"", nil, true},
		{http.MethodGet, nil, true},
		{http.MethodHead, nil, true},
		{http.MethodOptions, nil, true},
		{http.MethodTrace, nil, true},
		{http.MethodPut, nil, true},
		{http.MethodDelete, nil, true},
		{http.MethodPost, nil, false},
		{http.MethodPatch, nil, false},
		{http.MethodConnect, nil, false},
		{"get", nil, false},
		{"PROPFIND", nil, false},
		{http.MethodPost, http.Header{"Idempotency-Key": {"8e03978e-40d5-43e8-bc93-6894a57f9324"}}, true},
		{http.MethodPatch, http.Header{"X-Idempotency-Key": {"k"}}, true},
		{http.MethodPost, http.Header{"Idempotency-Key": nil}, true},
		{http.MethodPost, http.Header{"Idempotency-Key": {}}, true},
		{http.MethodPost, http.Header{"Idempotency-Key": {""}}, false},
		{http.MethodPost, http.Header{"Idempotency-Key": {" \t"}}, false},
		{http.MethodPost, http.Header{"Idempotency-Key": {"k", ""}}, false},
		{http.MethodPost, http.Header{"X-Idempotency-Key": {""}}, false},
		{http.MethodPost, http.Header{"Idempotency-Key": {""}, "X-Idempotency-Key": {"k"}}, true},
		{http.MethodPost, http.Header{"idempotency-key": {"k"}}, false},
		{http.MethodPost, http.Header{"Idempotency": {"k"}}, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.method, tt.header), func(t *testing.T) {
			req := &http.Request{Method: tt.method, Header: tt.header, URL: &url.URL{Scheme: "http", Host: "example.com"}}
			if got := ReplaySafe(req); got != tt.want {
				t.Errorf("ReplaySafe(%q, %v) = %v; want %v", tt.method, tt.header, got, tt.want)
			}
		})
	}
	t.Run("Header.Set", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodPost, "http://example.com/", nil)
		req.Header.Set("idempotency-key", "k")
		assert.True(t, ReplaySafe(req))
	})
	t.Run("nil", func(t *testing.T) {
		assert.False(t, ReplaySafe(nil))
	})
}
