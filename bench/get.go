package bench

import (
	"context"
	"io"
	"net/http"
)

// Get makes one GET of url through rt, bounded by ctx, reads the answer's
// body whole, and reports whether it was a 200 read to its end: the one
// call of the load harnesses.
func Get(ctx context.Context, rt http.RoundTripper, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK
}
