package keytable

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type value struct {
	key  string
	keep bool
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTable(max int) (*Table[value], *fakeClock) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return &Table[value]{
		Max:  max,
		New:  func(key string) *value { return &value{key: key} },
		Keep: func(v *value) bool { return v.keep },
		Now:  clk.now,
	}, clk
}

func use(t *Table[value], key string) *value {
	e := t.Use(key)
	t.Done(e)
	return e.Value
}

// A key unused for IdleAge is forgotten when a new key comes (at most
// once per sweepEvery); one in use is not, however long it stays so.
func TestForgottenWhenUnused(t *testing.T) {
	tab, clk := newTable(0)
	done := use(tab, "done")
	inUse := tab.Use("inflight")
	clk.t = clk.t.Add(IdleAge - time.Second)
	use(tab, "new1")
	if tab.Peek("done") == nil {
		t.Error("a key unused for less than IdleAge was forgotten")
	}
	clk.t = clk.t.Add(sweepEvery)
	use(tab, "new2")
	if tab.Peek("done") != nil {
		t.Error("a key unused for IdleAge was remembered")
	}
	if tab.Peek("inflight") == nil {
		t.Error("a key in use was forgotten")
	}
	tab.Done(inUse)
	clk.t = clk.t.Add(IdleAge)
	use(tab, "new3")
	if tab.Peek("inflight") != nil {
		t.Error("a key unused for IdleAge since its use ended was remembered")
	}
	if fresh := use(tab, "done"); fresh == done {
		t.Error("a forgotten key came back with its old value")
	}
}

// Beyond Max, the keys Keep does not prefer are forgotten first, the
// longest unused first.
func TestOverMaxKeptLast(t *testing.T) {
	tab, clk := newTable(8)
	use(tab, "kept").keep = true
	for i := range 20 {
		clk.t = clk.t.Add(time.Second)
		use(tab, fmt.Sprintf("h%d", i))
		if tab.Len() > 8 {
			t.Fatalf("%d keys after h%d; want at most 8", tab.Len(), i)
		}
	}
	for key, want := range map[string]bool{"kept": true, "h19": true, "h0": false} {
		if got := tab.Peek(key) != nil; got != want {
			t.Errorf("remembers %s: %v; want %v", key, got, want)
		}
	}
}

// Keys used from many goroutines at once, beyond Max: every use finds
// its key's one value while in use, and the count stays the table's.
func TestConcurrent(t *testing.T) {
	tab, _ := newTable(64)
	var mu sync.Mutex
	tab.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Unix(0, 0) }
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				key := fmt.Sprintf("k%d", (g*7+i)%500)
				e := tab.Use(key)
				if e.Value.key != key || tab.Peek(key) != e {
					t.Errorf("use of %s found %s", key, e.Value.key)
				}
				tab.Done(e)
			}
		})
	}
	wg.Wait()
	n := 0
	tab.m.Range(func(any, any) bool { n++; return true })
	if n != tab.Len() {
		t.Errorf("the table holds %d keys and counts %d", n, tab.Len())
	}
}
