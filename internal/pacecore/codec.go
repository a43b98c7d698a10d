package pacecore

import (
	"encoding/binary"
	"errors"
	"math"
	"time"
)

// codecVersion is the first byte of an encoded state. A state encoded by
// another version is refused: the fleet's keys start afresh (see
// UnmarshalBinary), as after a Redis restart.
const codecVersion = 4

// errCodec is the error of an encoded state that cannot be read.
var errCodec = errors.New("pacecore: encoded state of another version, or cut short")

// MarshalBinary encodes the state, for a store shared by a fleet: every
// field, in a fixed order, 8 bytes each, times as Unix nanoseconds (0 for
// none). The Config is not encoded: a fleet shares it.
func (s *State) MarshalBinary() ([]byte, error) {
	e := encoder{b: make([]byte, 0, 640)}
	e.b = append(e.b, codecVersion)
	e.fields(s)
	return e.b, nil
}

// UnmarshalBinary decodes data, which MarshalBinary encoded, into s,
// whose Config it keeps. s is unchanged when data cannot be read.
func (s *State) UnmarshalBinary(data []byte) error {
	if len(data) == 0 || data[0] != codecVersion {
		return errCodec
	}
	d := decoder{b: data[1:]}
	st := State{cfg: s.cfg}
	d.fields(&st)
	if d.short || len(d.b) != 0 || st.mode > Paced || st.meter.head >= meterBuckets || st.meter.head < 0 {
		return errCodec
	}
	*s = st
	return nil
}

// The one list of the fields, for both ways: each coder's methods take a
// pointer to the field.
type coder interface {
	i64(*int64)
	u64(*uint64)
	f64(*float64)
	t(*time.Time)
	flag(*bool)
}

func code[C coder](c C, s *State) {
	mode := int64(s.mode)
	c.i64(&mode)
	s.mode = Mode(255) // refused by UnmarshalBinary: a mode out of range
	if mode >= 0 && mode <= int64(Paced) {
		s.mode = Mode(mode)
	}
	m := &s.meter
	c.t(&m.start)
	head := int64(m.head)
	c.i64(&head)
	m.head = int(head)
	for i := range m.b {
		b := &m.b[i]
		c.t(&b.first)
		c.t(&b.firstOK)
		c.i64(&b.sent)
		c.i64(&b.ok)
		c.i64(&b.refused)
		c.i64(&b.spent)
	}
	cv := &s.curve
	c.f64(&cv.base)
	c.f64(&cv.top)
	hold := int64(cv.hold)
	c.i64(&hold)
	cv.hold = time.Duration(hold)
	c.t(&cv.cutAt)
	c.f64(&cv.capacity)
	finds := int64(cv.finds)
	c.i64(&finds)
	cv.finds = int(finds)
	c.t(&s.sched.next)
	c.t(&s.sched.paused)
	c.u64(&s.sched.gen)
	c.f64(&s.engage.s)
	w := &s.window
	ints := [...]*int{&w.slots, &w.inflight, &w.refused}
	for _, v := range ints {
		n := int64(*v)
		c.i64(&n)
		*v = int(n)
	}
	c.t(&w.began)
	for _, g := range [...]*genTally{&s.gen, &s.half, &s.halfBefore} {
		c.f64(&g.n)
		c.f64(&g.k)
	}
	c.f64(&s.halfFrom)
	c.f64(&s.floor)
	c.t(&s.chainStart)
	c.f64(&s.chainRate)
	q := &s.quota
	c.i64(&q.remaining)
	c.t(&q.reset)
	c.t(&q.probeUntil)
	zeros := int64(q.zeros)
	c.flag(&q.spreading)
	c.i64(&zeros)
	q.zeros = int(zeros)
}

type encoder struct{ b []byte }

func (e *encoder) fields(s *State) { code(e, s) }
func (e *encoder) u64(v *uint64)   { e.b = binary.LittleEndian.AppendUint64(e.b, *v) }
func (e *encoder) i64(v *int64)    { e.b = binary.LittleEndian.AppendUint64(e.b, uint64(*v)) }
func (e *encoder) f64(v *float64)  { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(*v)) }
func (e *encoder) flag(v *bool) {
	var n int64
	if *v {
		n = 1
	}
	e.i64(&n)
}
func (e *encoder) t(v *time.Time) {
	var n int64
	if !v.IsZero() {
		n = v.UnixNano()
	}
	e.i64(&n)
}

type decoder struct {
	b     []byte
	short bool
}

func (d *decoder) fields(s *State) { code(d, s) }

func (d *decoder) u64(v *uint64) {
	if len(d.b) < 8 {
		d.short = true
		return
	}
	*v = binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
}

func (d *decoder) i64(v *int64) {
	var u uint64
	d.u64(&u)
	*v = int64(u)
}

func (d *decoder) f64(v *float64) {
	var u uint64
	d.u64(&u)
	*v = math.Float64frombits(u)
	if math.IsNaN(*v) || math.IsInf(*v, 0) {
		d.short = true // no field holds either
	}
}

func (d *decoder) flag(v *bool) {
	var n int64
	d.i64(&n)
	*v = n == 1
	if n != 0 && n != 1 {
		d.short = true // no bool is encoded so
	}
}

func (d *decoder) t(v *time.Time) {
	var n int64
	d.i64(&n)
	*v = time.Time{}
	if n != 0 {
		*v = time.Unix(0, n)
	}
}
