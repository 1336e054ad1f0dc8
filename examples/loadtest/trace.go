package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/archenet/archenet/components"
)

// Format "transform trace v1": CSV, optionally gzip-compressed.
//
//	# transform trace v1 rate=60
//	tick,id,px,py,pz,qx,qy,qz,qw
//	0,0,1.5,10,-3,0,0,0,1
//	...
//
// One row per entity per tick; ticks ascend by exactly 1 (a tick with no
// rows cannot be written), ids ascend strictly within a tick. Positions in
// metres, rotations as unit quaternions (x, y, z, w). An id present at tick t
// and absent at t+1 was despawned; a first appearance is a spawn.
const (
	traceMagic  = "# transform trace v1"
	traceColumn = "tick,id,px,py,pz,qx,qy,qz,qw"

	maxTraceLine  = 4096
	maxTraceRate  = 1000
	maxTraceCoord = 1e6 // metres; the world codec is exact far beyond, but a trace this large is a mistake
	maxTraceInt   = math.MaxInt32
	quatTolerance = 1e-3 // |‖q‖ − 1| accepted (rows are written with a few decimals), then normalized
)

// Trace is a parsed transform trace: frames of consecutive ticks.
type Trace struct {
	Rate   int // ticks per second
	Frames []TraceFrame
}

// TraceFrame is the state of every body at one tick.
type TraceFrame struct {
	Tick   int
	Bodies []TraceBody // ids ascending
}

// TraceBody is one body's pose.
type TraceBody struct {
	ID  int
	Pos components.Vec3
	Rot components.Quat // unit
}

// Body returns the body with id, or false.
func (f *TraceFrame) Body(id int) (TraceBody, bool) {
	lo, hi := 0, len(f.Bodies)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if f.Bodies[m].ID < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(f.Bodies) && f.Bodies[lo].ID == id {
		return f.Bodies[lo], true
	}
	return TraceBody{}, false
}

// MaxBodies returns the largest number of bodies in one frame.
func (t *Trace) MaxBodies() int {
	n := 0
	for i := range t.Frames {
		n = max(n, len(t.Frames[i].Bodies))
	}
	return n
}

// ErrTrace is matched (errors.Is) by every trace parse error.
var ErrTrace = errors.New("malformed transform trace")

// TraceError is a parse error at a line (1-based) of the trace.
type TraceError struct {
	Line int
	Msg  string
}

func (e *TraceError) Error() string { return fmt.Sprintf("trace: line %d: %s", e.Line, e.Msg) }

// Is makes errors.Is(err, ErrTrace) true.
func (e *TraceError) Is(target error) bool { return target == ErrTrace }

// ParseTrace reads a transform trace, gzip-compressed or not (detected by
// the gzip magic bytes). Every error is a *TraceError naming the line.
func ParseTrace(r io.Reader) (*Trace, error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &TraceError{Line: 1, Msg: "gzip: " + err.Error()}
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 256), maxTraceLine)
	p := traceParser{t: &Trace{}}
	for sc.Scan() {
		p.line++
		if err := p.parseLine(sc.Bytes()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		msg := err.Error()
		if errors.Is(err, bufio.ErrTooLong) {
			msg = fmt.Sprintf("line longer than %d bytes", maxTraceLine)
		}
		return nil, &TraceError{Line: p.line + 1, Msg: msg}
	}
	switch {
	case p.line == 0:
		return nil, &TraceError{Line: 1, Msg: "empty trace: want header " + strconv.Quote(traceMagic+" rate=N")}
	case p.line == 1:
		return nil, &TraceError{Line: 2, Msg: "missing column line " + strconv.Quote(traceColumn)}
	case len(p.t.Frames) == 0:
		return nil, &TraceError{Line: 3, Msg: "no rows"}
	}
	return p.t, nil
}

type traceParser struct {
	t    *Trace
	line int
}

func (p *traceParser) errorf(format string, args ...any) error {
	return &TraceError{Line: p.line, Msg: fmt.Sprintf(format, args...)}
}

func (p *traceParser) parseLine(b []byte) error {
	b = bytes.TrimSuffix(b, []byte{'\r'})
	switch p.line {
	case 1:
		return p.parseHeader(string(b))
	case 2:
		if string(b) != traceColumn {
			return p.errorf("column line is %q, want %q", truncate(string(b)), traceColumn)
		}
		return nil
	}
	if len(b) == 0 {
		return p.errorf("empty line")
	}
	var f [9][]byte
	n := 0
	for rest := b; ; n++ {
		i := bytes.IndexByte(rest, ',')
		if n == len(f) {
			return p.errorf("more than %d fields", len(f))
		}
		if i < 0 {
			f[n] = rest
			n++
			break
		}
		f[n], rest = rest[:i], rest[i+1:]
	}
	if n != len(f) {
		return p.errorf("%d fields, want %d (%s)", n, len(f), traceColumn)
	}
	tick, err := p.parseInt("tick", f[0])
	if err != nil {
		return err
	}
	id, err := p.parseInt("id", f[1])
	if err != nil {
		return err
	}
	var v [7]float64
	names := [7]string{"px", "py", "pz", "qx", "qy", "qz", "qw"}
	for i := range v {
		x, err := strconv.ParseFloat(string(f[2+i]), 64)
		if err != nil {
			return p.errorf("%s: %q is not a number", names[i], truncate(string(f[2+i])))
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return p.errorf("%s: %v is not finite", names[i], x)
		}
		if i < 3 && math.Abs(x) > maxTraceCoord {
			return p.errorf("%s: %v is beyond ±%g m", names[i], x, maxTraceCoord)
		}
		v[i] = x
	}
	q := components.Quat{X: v[3], Y: v[4], Z: v[5], W: v[6]}
	if norm := math.Sqrt(q.Dot(q)); math.Abs(norm-1) > quatTolerance {
		return p.errorf("quaternion norm %.6g is not 1", norm)
	}
	body := TraceBody{ID: id, Pos: components.Vec3{X: v[0], Y: v[1], Z: v[2]}, Rot: q.Normalize()}

	fr := p.t.Frames
	switch last := len(fr) - 1; {
	case last < 0 || tick == fr[last].Tick+1:
		p.t.Frames = append(fr, TraceFrame{Tick: tick, Bodies: []TraceBody{body}})
	case tick == fr[last].Tick:
		bs := fr[last].Bodies
		if prev := bs[len(bs)-1].ID; id <= prev {
			return p.errorf("id %d after id %d in tick %d: ids must ascend within a tick", id, prev, tick)
		}
		fr[last].Bodies = append(bs, body)
	default:
		return p.errorf("tick %d after tick %d: ticks must ascend by 1", tick, fr[last].Tick)
	}
	return nil
}

func (p *traceParser) parseHeader(s string) error {
	rest, ok := strings.CutPrefix(s, traceMagic)
	if !ok {
		return p.errorf("header is %q, want %q", truncate(s), traceMagic+" rate=N")
	}
	rate := 0
	for _, kv := range strings.Fields(rest) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return p.errorf("header: %q is not key=value", truncate(kv))
		}
		if k != "rate" {
			continue // unknown keys are for future versions of the writer
		}
		r, err := strconv.Atoi(v)
		if err != nil || r < 1 || r > maxTraceRate {
			return p.errorf("header: rate %q is not an integer in 1..%d", truncate(v), maxTraceRate)
		}
		rate = r
	}
	if rate == 0 {
		return p.errorf("header: missing rate=N")
	}
	p.t.Rate = rate
	return nil
}

func (p *traceParser) parseInt(name string, b []byte) (int, error) {
	x, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || x < 0 || x > maxTraceInt {
		return 0, p.errorf("%s: %q is not an integer in 0..%d", name, truncate(string(b)), maxTraceInt)
	}
	return int(x), nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// WriteTrace writes t in the trace format, positions at 0.1 mm and
// quaternion components at 1e-5 (the parser normalizes them), so that a
// resting body's rows repeat exactly and compress well.
func WriteTrace(w io.Writer, t *Trace) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s rate=%d\n%s\n", traceMagic, t.Rate, traceColumn)
	var b []byte
	for _, f := range t.Frames {
		for _, body := range f.Bodies {
			b = strconv.AppendInt(b[:0], int64(f.Tick), 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, int64(body.ID), 10)
			for _, x := range [...]float64{body.Pos.X, body.Pos.Y, body.Pos.Z} {
				b = append(b, ',')
				b = appendFixed(b, x, 4)
			}
			for _, x := range [...]float64{body.Rot.X, body.Rot.Y, body.Rot.Z, body.Rot.W} {
				b = append(b, ',')
				b = appendFixed(b, x, 5)
			}
			b = append(b, '\n')
			if _, err := bw.Write(b); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// appendFixed formats x with prec decimals, without a negative zero.
func appendFixed(b []byte, x float64, prec int) []byte {
	s := strconv.AppendFloat(nil, x, 'f', prec, 64)
	if s[0] == '-' && strings.Trim(string(s[1:]), "0.") == "" {
		s = s[1:]
	}
	return append(b, s...)
}
