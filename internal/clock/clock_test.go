package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v; want nil", err)
	}
	if err := Sleep(context.Background(), time.Nanosecond); err != nil {
		t.Errorf("Sleep(1ns) = %v; want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{0, -1, time.Hour} {
		if err := Sleep(ctx, d); !errors.Is(err, context.Canceled) {
			t.Errorf("Sleep(done, %v) = %v; want context.Canceled", d, err)
		}
	}
}
