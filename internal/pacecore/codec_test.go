package pacecore

import (
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/backoff-jitter/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every field of the state, set at random, comes back from its encoding:
// a field added to the state and not to fields fails here.
func TestCodecCoversTheState(t *testing.T) {
	cfg := &Config{MinRate: DefaultMinRate}
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		s := New(cfg)
		fill(reflect.ValueOf(&s).Elem(), rnd, "State")
		b, err := s.MarshalBinary()
		require.NoError(t, err)
		got := New(cfg)
		require.NoError(t, got.UnmarshalBinary(b))
		require.Equal(t, s, got)
	}
	// The fields as they are now: a change of them changes the encoding,
	// whose format must change with it (older states are then refused).
	const shape = "957fe14f3270f6fb" // of format 2
	assert.Equal(t, shape, fingerprint(reflect.TypeFor[State]()),
		"the state's fields changed: add them to fields, bump format, and record the new fingerprint")
}

// A state encoded in the middle of the simulations decodes to one that
// decides the same from there.
func TestCodecResumes(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	cfg := &Config{MinRate: DefaultMinRate, InitialWindow: 10}
	a := New(cfg)
	now := pacerEpoch
	for i := range 20000 {
		now = now.Add(time.Duration(rnd.IntN(int(5 * time.Millisecond))))
		ev := randomEvent(rnd, &a)
		fa := a.Step(now, ev)
		if i%97 == 0 {
			b, err := a.MarshalBinary()
			require.NoError(t, err)
			c := New(cfg)
			require.NoError(t, c.UnmarshalBinary(b))
			next := randomEvent(rnd, &a)
			at := now.Add(time.Millisecond)
			fa, fc := a.Step(at, next), c.Step(at, next)
			require.Equal(t, fa, fc, "event %d", i)
			require.Equal(t, a.Rate(), c.Rate())
			require.Equal(t, a.Mode(), c.Mode())
		}
		_ = fa
	}
}

func TestCodecRefusesMalformed(t *testing.T) {
	s := New(&Config{MinRate: DefaultMinRate, InitialWindow: 10})
	s.Step(pacerEpoch, Event{Kind: Admit})
	b, err := s.MarshalBinary()
	require.NoError(t, err)
	for name, bad := range map[string][]byte{
		"empty":          nil,
		"another format": append([]byte{format + 1}, b[1:]...),
		"short":          b[:len(b)-1],
		"long":           append(b[:len(b):len(b)], 0),
		"a NaN rate":     nanRate(),
		"no such mode":   append([]byte{format, 9}, b[2:]...),
	} {
		got := New(&Config{MinRate: 1})
		before := got
		err := got.UnmarshalBinary(bad)
		assert.Error(t, err, name)
		assert.Equal(t, before, got, "%s: the state is left as it was", name)
	}
	fresh := New(&Config{})
	assert.ErrorIs(t, fresh.UnmarshalBinary(nil), ErrFormat)
}

// fill sets every field of v at random, unexported ones included, but
// the settings (cfg) and the signals of a step (fx), which the encoding
// leaves out.
func fill(v reflect.Value, rnd *rand.Rand, path string) {
	if v.CanAddr() && !v.CanSet() {
		v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	}
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		if rnd.IntN(4) > 0 {
			v.Set(reflect.ValueOf(time.Unix(0, rnd.Int64N(math.MaxInt64)).UTC()))
		}
		return
	case v.Type() == reflect.TypeFor[Mode]():
		v.SetUint(uint64(rnd.IntN(int(ModeHeld) + 1)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			name := v.Type().Field(i).Name
			if path == "State" && (name == "cfg" || name == "fx") {
				continue
			}
			fill(v.Field(i), rnd, path+"."+name)
		}
	case reflect.Bool:
		v.SetBool(rnd.IntN(2) == 1)
	case reflect.Int, reflect.Int64:
		v.SetInt(rnd.Int64() - math.MaxInt64/2)
	case reflect.Uint64:
		v.SetUint(rnd.Uint64())
	case reflect.Float64:
		v.SetFloat([]float64{rnd.NormFloat64() * 1000, math.Inf(1), 0}[rnd.IntN(3)])
	default:
		panic(fmt.Sprintf("fill: %s is a %s", path, v.Type()))
	}
}

// fingerprint hashes the names and types of typ's fields, recursively.
func fingerprint(typ reflect.Type) string {
	var b strings.Builder
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[time.Time]() {
			b.WriteString(typ.String())
			return
		}
		b.WriteString("{")
		for i := range typ.NumField() {
			f := typ.Field(i)
			b.WriteString(f.Name + " ")
			walk(f.Type)
			b.WriteString(";")
		}
		b.WriteString("}")
	}
	walk(typ)
	return fmt.Sprintf("%x", sha256.Sum256([]byte(b.String())))[:16]
}

// Whatever bytes a shared store hands back, UnmarshalBinary returns an
// error or a state whose encoding decodes back to it (a varint longer
// than it need be decodes, so the first bytes may differ); it never
// panics, and the state it accepts steps without panicking either.
func FuzzCodec(f *testing.F) {
	cfg := &Config{MinRate: DefaultMinRate, InitialWindow: 10}
	s := New(cfg)
	b, _ := s.MarshalBinary()
	f.Add(b)
	rnd := rand.New(rand.NewPCG(7, 8))
	for range 300 {
		s.Step(pacerEpoch.Add(time.Duration(rnd.IntN(int(time.Second)))), randomEvent(rnd, &s))
	}
	b, _ = s.MarshalBinary()
	f.Add(b)
	f.Add([]byte{format})
	f.Fuzz(func(t *testing.T, b []byte) {
		got := New(cfg)
		if got.UnmarshalBinary(b) != nil {
			return
		}
		again, err := got.MarshalBinary()
		require.NoError(t, err)
		back := New(cfg)
		require.NoError(t, back.UnmarshalBinary(again))
		twice, err := back.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, again, twice, "encoded, decoded and encoded again")
		got.Step(pacerEpoch, Event{Kind: Reserve})
		got.Step(pacerEpoch, Event{Kind: Answer, Class: retry.Throttled, ForRate: true, Gen: got.Gen()})
	})
}

// nanRate returns the encoding of a new state whose rate is NaN.
func nanRate() []byte {
	s := New(&Config{MinRate: DefaultMinRate})
	s.rate.fill = math.NaN()
	b, _ := s.MarshalBinary()
	return b
}
