package main

// This file is the wrapper: what the author of a client library for a
// rate-limited API writes, on top of retry, so that its users get retries
// that are safe without thinking about them. In a real project it would be
// a package of its own (widgets.New, widgets.Client); the rest of this
// example is a local stand-in for the API and a program that uses it.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/backoff-jitter/retry"
)

// Options configure a [Client]. The zero value of every field but
// Endpoint means the default stated on it. The retry policy is not among
// them: choosing it is the wrapper's job, per endpoint, below.
type Options struct {
	// Endpoint is the API's base URL, such as "https://api.widgets.example".
	Endpoint string
	// APIKey is sent as a bearer token.
	APIKey string
	// HTTPTransport sends the attempts. Nil means a clone of
	// http.DefaultTransport, one per Client, shared by its endpoints.
	HTTPTransport http.RoundTripper
	// Logger receives a Warn record for each retry and an Error record for
	// each call that failed after a retry or a refusal. Nil means none:
	// a library does not log unless asked to.
	Logger *slog.Logger
	// ReadTimeout bounds a read call, its retries and waits included.
	// Zero means 10s. A shorter deadline on the caller's context wins.
	ReadTimeout time.Duration
	// WriteTimeout bounds a write call. Zero means 30s.
	WriteTimeout time.Duration
	// AttemptTimeout bounds each attempt of a read: a stuck attempt is
	// abandoned and retried. Zero means 2s.
	AttemptTimeout time.Duration
}

// Client calls the Widgets API. It is safe for concurrent use.
type Client struct {
	endpoint *url.URL
	apiKey   string
	base     http.RoundTripper
	reads    *http.Client // GET: idempotent, retried freely
	writes   *http.Client // POST: retried when safe, with an Idempotency-Key

	readTimeout, writeTimeout time.Duration
	stats                     Stats
}

// New returns a Client for the API at opts.Endpoint.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(opts.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("widgets: Endpoint %q is not an http or https URL", opts.Endpoint)
	}
	c := &Client{
		endpoint:     u,
		apiKey:       opts.APIKey,
		base:         opts.HTTPTransport,
		readTimeout:  orDefault(opts.ReadTimeout, 10*time.Second),
		writeTimeout: orDefault(opts.WriteTimeout, 30*time.Second),
	}
	if c.base == nil {
		c.base = http.DefaultTransport.(*http.Transport).Clone()
	}
	// Reads are idempotent: every failure worth retrying is retried,
	// quickly at first, and a stuck attempt is cut short.
	c.reads = &http.Client{Transport: retry.New(c.base, append(c.hooks("read", opts.Logger),
		retry.WithMaxAttempts(5),
		retry.WithBackoff(retry.Exponential{Base: 100 * time.Millisecond, Cap: 2 * time.Second, Jitter: retry.FullJitter}),
		retry.WithAttemptTimeout(orDefault(opts.AttemptTimeout, 2*time.Second)),
		retry.WithMaxRetryAfter(10*time.Second),
	)...)}
	// Writes create things. Each call carries an Idempotency-Key, so the
	// Transport replays it after a failure that may have reached the
	// server (a 502, a reset), and the server, which remembers the key,
	// answers a replay with the first result instead of acting twice.
	// They wait longer between attempts and make fewer, and their
	// attempts are not cut short: a write that is slow is not stuck.
	c.writes = &http.Client{Transport: retry.New(c.base, append(c.hooks("write", opts.Logger),
		retry.WithMaxAttempts(4),
		retry.WithBackoff(retry.Exponential{Base: 250 * time.Millisecond, Cap: 5 * time.Second, Jitter: retry.FullJitter}),
		retry.WithMaxRetryAfter(20*time.Second),
	)...)}
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Close releases the Client's idle connections.
func (c *Client) Close() {
	if ci, ok := c.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// hooks wire the Transport's events to the counters, to the logger if any,
// and to the record of the call they belong to.
func (c *Client) hooks(endpoint string, logger *slog.Logger) []retry.Option {
	logRetry, logGiveUp := func(retry.Event) {}, func(retry.Event) {}
	if logger != nil {
		l := logger.With("api", "widgets", "endpoint", endpoint)
		logRetry, logGiveUp = retry.SlogHook(l, slog.LevelWarn), retry.SlogHook(l, slog.LevelError)
	}
	return []retry.Option{
		retry.WithOnRetry(func(e retry.Event) {
			c.stats.Retries.Add(1)
			c.stats.byClass(e.Class).Add(1)
			if e.FromServer {
				c.stats.ServerWaits.Add(1)
			}
			if n := noteOf(e.Request); n != nil {
				n.retries.Add(1)
			}
			logRetry(e)
		}),
		retry.WithOnGiveUp(func(e retry.Event) {
			c.stats.GiveUps.Add(1)
			if n := noteOf(e.Request); n != nil {
				n.reason.Store(int32(e.Reason))
				n.attempts.Store(int32(e.Attempt))
			}
			logGiveUp(e)
		}),
	}
}

// Stats counts what the Client's Transports did. Read its fields with
// Load; they only grow.
type Stats struct {
	Calls       atomic.Int64 // API calls made
	Retries     atomic.Int64 // retries, of all calls
	Throttled   atomic.Int64 // retries after a 429, a 503 or another refusal
	Transient   atomic.Int64 // retries after a failure the server may have seen
	Unsent      atomic.Int64 // retries of attempts that never left
	ServerWaits atomic.Int64 // retries that waited as long as the server asked
	GiveUps     atomic.Int64 // calls returned failed after a retry or a refusal
}

func (s *Stats) byClass(c retry.Class) *atomic.Int64 {
	switch c {
	case retry.Throttled:
		return &s.Throttled
	case retry.Unsent:
		return &s.Unsent
	}
	return &s.Transient
}

// Stats returns the Client's counters.
func (c *Client) Stats() *Stats { return &c.stats }

// note is what the hooks learn about one call, found through the context
// of its request.
type note struct {
	retries  atomic.Int32
	attempts atomic.Int32 // set when the Transport gives up
	reason   atomic.Int32 // retry.StopReason of the failure returned
}

// made returns the number of attempts the call made.
func (n *note) made() int {
	if a := n.attempts.Load(); a > 0 {
		return int(a)
	}
	return int(n.retries.Load()) + 1
}

type noteKey struct{}

func noteOf(r *http.Request) *note {
	if r == nil {
		return nil
	}
	n, _ := r.Context().Value(noteKey{}).(*note)
	return n
}

// Widget is the API's resource.
type Widget struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Error is an error the API answered, or the failure of a call.
type Error struct {
	Op         string // "GetWidget", ...
	StatusCode int    // 0 when no response came
	Code       string // the API's error code: "not_found", "invalid", ...
	Message    string
	Attempts   int              // attempts made
	Reason     retry.StopReason // why no further attempt was made
	Err        error            // the transport error, when no response came
}

func (e *Error) Error() string {
	what := e.Message
	if e.Err != nil {
		what = e.Err.Error()
	} else if e.Code != "" {
		what = e.Code + ": " + e.Message
	}
	s := "s"
	if e.Attempts == 1 {
		s = ""
	}
	return fmt.Sprintf("widgets: %s: %s (%d attempt%s, %v)", e.Op, what, e.Attempts, s, e.Reason)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrNotFound is matched by errors.Is for a 404.
var ErrNotFound = errors.New("widgets: not found")

// Is reports whether e is a 404 when target is ErrNotFound.
func (e *Error) Is(target error) bool {
	return target == ErrNotFound && e.StatusCode == http.StatusNotFound
}

// GetWidget returns the widget with the given ID.
func (c *Client) GetWidget(ctx context.Context, id string) (*Widget, error) {
	var w Widget
	err := c.call(ctx, "GetWidget", c.reads, c.readTimeout, http.MethodGet, "/v1/widgets/"+url.PathEscape(id), nil, "", &w)
	if err != nil {
		return nil, err
	}
	return &w, nil
}

// ListWidgets returns every widget.
func (c *Client) ListWidgets(ctx context.Context) ([]Widget, error) {
	var out struct {
		Widgets []Widget `json:"widgets"`
	}
	err := c.call(ctx, "ListWidgets", c.reads, c.readTimeout, http.MethodGet, "/v1/widgets", nil, "", &out)
	return out.Widgets, err
}

// CreateWidget creates a widget named name. The call carries an
// Idempotency-Key made for it, the same on every attempt, so a retry never
// creates a second widget; key, if not empty, is used instead, for a
// caller that retries the call itself (after a restart, say).
func (c *Client) CreateWidget(ctx context.Context, name, key string) (*Widget, error) {
	body, err := json.Marshal(map[string]string{"name": name})
	if err != nil {
		return nil, err
	}
	if key == "" {
		key = rand.Text() // 26 characters, 130 random bits
	}
	var w Widget
	if err := c.call(ctx, "CreateWidget", c.writes, c.writeTimeout, http.MethodPost, "/v1/widgets", body, key, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// call makes one API call: a deadline, one request (whose attempts the
// Transport makes), and the answer decoded into out or turned into an
// *Error.
func (c *Client) call(ctx context.Context, op string, hc *http.Client, timeout time.Duration,
	method, path string, body []byte, idempotencyKey string, out any) error {
	c.stats.Calls.Add(1)
	n := new(note)
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, noteKey{}, n), timeout)
	defer cancel()

	var reqBody io.Reader
	if body != nil {
		reqBody = bytes.NewReader(body) // sets GetBody: replays need no copy
	}
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint.JoinPath(path).String(), reqBody)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}

	resp, err := hc.Do(req)
	attempts := n.made()
	reason := retry.StopReason(n.reason.Load())
	if err != nil {
		return &Error{Op: op, Attempts: attempts, Reason: reason, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return &Error{Op: op, StatusCode: resp.StatusCode, Attempts: attempts, Reason: reason, Err: err}
	}
	if resp.StatusCode >= 300 {
		e := &Error{Op: op, StatusCode: resp.StatusCode, Attempts: attempts, Reason: reason, Message: resp.Status}
		var doc struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(data, &doc) == nil && doc.Error.Code != "" {
			e.Code, e.Message = doc.Error.Code, doc.Error.Message
		}
		return e
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &Error{Op: op, StatusCode: resp.StatusCode, Attempts: attempts, Reason: reason, Err: err}
	}
	return nil
}
