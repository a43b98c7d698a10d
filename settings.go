package retry

import (
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/go-cleanhttp"
)

// config is a Transport's settings with the defaults filled in.
type config struct {
	base          http.RoundTripper
	maxAttempts   int
	backoff       Backoff
	classifier    Classifier
	maxRetryAfter time.Duration
	maxBuffered   int64
	budget        Budget // nil: no budget
}

func (t *Transport) config() (*config, error) {
	t.once.Do(t.setup)
	return &t.cfg, t.cfgErr
}

func (t *Transport) setup() {
	c := config{
		base:          t.Base,
		maxAttempts:   t.MaxAttempts,
		backoff:       t.Backoff,
		classifier:    t.Classifier,
		maxRetryAfter: t.MaxRetryAfter,
		maxBuffered:   t.MaxBufferedBody,
	}
	if c.base == nil {
		c.base = cleanhttp.DefaultPooledTransport()
	}
	if c.maxAttempts == 0 {
		c.maxAttempts = DefaultMaxAttempts
	}
	if c.backoff == nil {
		c.backoff = DefaultBackoff
	}
	if c.maxRetryAfter == 0 {
		c.maxRetryAfter = DefaultMaxRetryAfter
	}
	if c.maxBuffered == 0 {
		c.maxBuffered = DefaultMaxBufferedBody
	}
	switch t.Budget.(type) {
	case nil:
		c.budget = new(TokenBucket)
	case noBudget:
		// No budget: the loop skips it.
	default:
		c.budget = t.Budget
	}
	t.cfg = c
	t.cfgErr = t.check()
}

// check validates the fields as the user set them.
func (t *Transport) check() error {
	switch {
	case t.MaxAttempts < 0:
		return fmt.Errorf("retry: MaxAttempts %d is negative", t.MaxAttempts)
	case t.MaxRetryAfter < 0:
		return fmt.Errorf("retry: MaxRetryAfter %v is negative", t.MaxRetryAfter)
	case t.MaxBufferedBody < 0:
		return fmt.Errorf("retry: MaxBufferedBody %d is negative", t.MaxBufferedBody)
	case t.AttemptTimeout < 0:
		return fmt.Errorf("retry: AttemptTimeout %v is negative", t.AttemptTimeout)
	case t.RateLimitReset > ResetUnixMillis:
		return fmt.Errorf("retry: RateLimitReset %d is not a known format", t.RateLimitReset)
	case t.AttemptHeader != "" && !isToken(t.AttemptHeader):
		return fmt.Errorf("retry: AttemptHeader %q is not a valid header name", t.AttemptHeader)
	}
	if v, ok := t.Pacer.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	if v, ok := t.Backoff.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("retry: invalid Backoff: %w", err)
		}
	}
	if v, ok := t.Budget.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("retry: invalid Budget: %w", err)
		}
	}
	return nil
}

// forRequest returns the Transport and settings that send req: t's own,
// or, when req's context carries options, a Transport of req's own made of
// t's fields and them.
func (t *Transport) forRequest(req *http.Request, c *config) (*Transport, *config, error) {
	opts, _ := req.Context().Value(optionsKey{}).([]Option)
	if len(opts) == 0 {
		return t, c, nil
	}
	o := t.clone()
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	// The Transport's connections and budget, not new ones.
	if o.Base == nil {
		o.Base = c.base
	}
	if o.Budget == nil {
		o.Budget = c.budget
		if o.Budget == nil {
			o.Budget = NoBudget
		}
	}
	oc, err := o.config()
	return o, oc, err
}

// clone returns a new Transport with t's exported fields and seams.
func (t *Transport) clone() *Transport {
	return &Transport{
		Base:            t.Base,
		MaxAttempts:     t.MaxAttempts,
		Backoff:         t.Backoff,
		Classifier:      t.Classifier,
		MaxRetryAfter:   t.MaxRetryAfter,
		MaxBufferedBody: t.MaxBufferedBody,
		AttemptTimeout:  t.AttemptTimeout,
		RateLimitReset:  t.RateLimitReset,
		AttemptHeader:   t.AttemptHeader,
		Budget:          t.Budget,
		Pacer:           t.Pacer,
		OnRetry:         t.OnRetry,
		OnGiveUp:        t.OnGiveUp,
		OnDone:          t.OnDone,
		now:             t.now,
		sleep:           t.sleep,
		rand:            t.rand,
	}
}
