package pacecore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The state's encoding, for a driver that keeps it outside the process
// (package redispace keeps it in Redis, shared by a fleet): every field
// but the settings (cfg) and the signals of a step under way (fx, empty
// between steps), in the order fields gives, after a byte naming the
// format. Integers are varints, floats their IEEE 754 bits, times their
// nanoseconds since 1970 (a zero time is a flag alone); a time decodes in
// UTC, without a monotonic reading, which changes no comparison.

// format names the encoding. It changes with any change of the state's
// fields (TestCodecCoversTheState pins them): a state of another format
// is refused, and its driver starts the key afresh.
const format = 2

// ErrFormat is UnmarshalBinary's error for a state of another format, or
// none: a driver starts the key afresh.
var ErrFormat = errors.New("pacecore: a state of another format")

// AppendBinary appends the state's encoding to b.
func (s *State) AppendBinary(b []byte) ([]byte, error) {
	w := &writer{b: append(b, format)}
	s.fields(w)
	return w.b, nil
}

// MarshalBinary returns the state's encoding.
func (s *State) MarshalBinary() ([]byte, error) { return s.AppendBinary(nil) }

// UnmarshalBinary sets the state, but for its settings, from its
// encoding. On an error the state is left as it was.
func (s *State) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != format {
		return ErrFormat
	}
	t := State{cfg: s.cfg}
	r := &reader{b: b[1:]}
	t.fields(r)
	switch {
	case r.err != nil:
		return r.err
	case len(r.b) > 0:
		return fmt.Errorf("pacecore: %d bytes after the state", len(r.b))
	case t.mode > ModeHeld:
		return fmt.Errorf("pacecore: no mode %d", t.mode)
	}
	*s = t
	return nil
}

// codec reads or writes each field it is given.
type codec interface {
	int(*int)
	i64(*int64)
	u64(*uint64)
	f64(*float64)
	flag(*bool)
	time(*time.Time)
}

// fields gives c every field of the state, in the encoding's order.
func (s *State) fields(c codec) {
	mode := uint64(s.mode)
	c.u64(&mode)
	s.mode = Mode(min(mode, math.MaxUint8))

	st := &s.start
	c.int(&st.inflight)
	c.int(&st.slots)
	c.int(&st.waiting)
	c.time(&st.began)
	c.u64(&st.round)

	sc := &s.sched
	c.u64(&sc.gen)
	c.time(&sc.next)
	interval := int64(sc.interval)
	c.i64(&interval)
	sc.interval = time.Duration(interval)
	c.time(&sc.paused)
	c.f64(&sc.granted)

	s.rate.fields(c)

	m := &s.meter
	c.flag(&m.okOnce)
	c.i64(&m.sent)
	c.i64(&m.sentBefore)
	c.i64(&m.ok)
	c.i64(&m.refused)
	c.i64(&m.lastOK)
	c.i64(&m.lastRefused)
	c.f64(&m.measured)
	c.f64(&m.accepted)
	c.time(&m.bucket)
	c.flag(&m.sampled)
	c.time(&m.drained)
	c.i64(&m.drainedOK)
	c.i64(&m.drainedRefused)
	c.f64(&m.suspicion)
	c.i64(&m.suspectOK)

	o := &s.outage
	c.time(&o.lastOK)
	c.int(&o.cutsSinceOK)
	c.f64(&o.base)
	c.f64(&o.streakAccepted)
	c.flag(&o.streakAfterOK)
	c.time(&o.cycleStart)
	c.i64(&o.cycleOK)
	c.int(&o.refusedSinceOK)

	sh := &s.shed
	c.f64(&sh.chainRate)
	c.u64(&sh.chainGen)
	c.f64(&sh.lowRate)
	c.int(&sh.hiN)
	c.int(&sh.hiK)
	c.flag(&sh.limit)
	c.int(&sh.epN)
	c.int(&sh.epK)
	c.int(&sh.loN)
	c.int(&sh.loK)
	c.flag(&sh.deep)
	sh.saved.fields(c)
	c.time(&sh.at)
	c.i64(&sh.atSent)
	c.int(&sh.atOK)
	c.f64(&sh.share)
	c.f64(&sh.origin)
}

// fields gives c every field of the curve.
func (r *rateCurve) fields(c codec) {
	c.f64(&r.fill)
	c.f64(&r.lastMax)
	c.time(&r.lastCut)
	c.f64(&r.cutTo)
	c.f64(&r.window)
	c.f64(&r.limit)
	c.int(&r.steady)
}

// writer appends the fields it is given to b.
type writer struct{ b []byte }

func (w *writer) int(v *int)     { w.b = binary.AppendVarint(w.b, int64(*v)) }
func (w *writer) i64(v *int64)   { w.b = binary.AppendVarint(w.b, *v) }
func (w *writer) u64(v *uint64)  { w.b = binary.AppendUvarint(w.b, *v) }
func (w *writer) f64(v *float64) { w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(*v)) }
func (w *writer) flag(v *bool)   { w.b = append(w.b, boolByte(*v)) }
func (w *writer) time(v *time.Time) {
	w.flag(new(!v.IsZero()))
	if !v.IsZero() {
		w.b = binary.AppendVarint(w.b, v.UnixNano())
	}
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// reader sets the fields it is given from b; after a short or malformed
// read, it sets nothing more and err says why.
type reader struct {
	b   []byte
	err error
}

var errMalformed = errors.New("pacecore: a malformed state: short, a flag neither 0 nor 1, or a NaN")

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errMalformed
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int(v *int)   { *v = int(r.varint()) }
func (r *reader) i64(v *int64) { *v = r.varint() }

func (r *reader) u64(v *uint64) {
	if r.err != nil {
		return
	}
	u, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errMalformed
		return
	}
	*v, r.b = u, r.b[n:]
}

func (r *reader) f64(v *float64) {
	if r.err != nil {
		return
	}
	if len(r.b) < 8 {
		r.err = errMalformed
		return
	}
	*v, r.b = math.Float64frombits(binary.LittleEndian.Uint64(r.b)), r.b[8:]
	if math.IsNaN(*v) {
		// No step makes one: a NaN rate would make every interval
		// nonsense. (+Inf is a restarted key's CUSUM.)
		r.err = errMalformed
	}
}

func (r *reader) flag(v *bool) {
	if r.err != nil {
		return
	}
	if len(r.b) < 1 || r.b[0] > 1 {
		r.err = errMalformed
		return
	}
	*v, r.b = r.b[0] == 1, r.b[1:]
}

func (r *reader) time(v *time.Time) {
	var set bool
	r.flag(&set)
	*v = time.Time{}
	if set {
		if ns := r.varint(); r.err == nil {
			*v = time.Unix(0, ns).UTC()
		}
	}
}
