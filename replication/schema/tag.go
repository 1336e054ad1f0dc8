package schema

import (
	"fmt"
	"strconv"
	"strings"
)

// tag is a parsed `net:"..."` struct tag.
type tag struct {
	skip      bool // "-"
	raw       bool
	angle     bool
	quat      bool
	vel       bool
	world     bool
	varint    bool
	owner     bool
	hasRange  bool
	min, max  float64
	imin      int64 // integer form of range, when both ends are integers
	imax      int64
	intRange  bool
	step      float64
	bits      int // 0 = unset
	limit     float64
	rest      float64
	cellBits  int
	hasParams bool // any key other than owner was given
}

func (t tag) kinds() int {
	n := 0
	for _, b := range []bool{t.raw, t.angle, t.quat, t.vel, t.world, t.varint} {
		if b {
			n++
		}
	}
	return n
}

// scalarOnly reports whether the tag describes a per-leaf codec (so that a
// tag on a struct or array is applied to each leaf).
func (t tag) scalarOnly() bool { return t.hasParams && !t.quat && !t.vel }

func parseFloat(key, s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", key, s)
	}
	return v, nil
}

func parseTag(s string) (tag, error) {
	var t tag
	s = strings.TrimSpace(s)
	if s == "" {
		return t, nil
	}
	if s == "-" {
		t.skip = true
		return t, nil
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, val, hasVal := strings.Cut(part, "=")
		key = strings.TrimSpace(key)
		if seen[key] {
			return t, fmt.Errorf("option %q given twice", key)
		}
		seen[key] = true
		if key != "owner" {
			t.hasParams = true
		}
		if err := t.set(key, val, hasVal); err != nil {
			return t, err
		}
	}
	if t.kinds() > 1 {
		return t, fmt.Errorf("options raw, angle, quat, vel, world and varint exclude each other")
	}
	if t.step != 0 && t.bits != 0 {
		return t, fmt.Errorf("give step= or bits=, not both")
	}
	return t, nil
}

// set applies option key (with val if hasVal) to t.
func (t *tag) set(key, val string, hasVal bool) error {
	flag := func(dst *bool) error {
		if hasVal {
			return fmt.Errorf("option %q takes no value", key)
		}
		*dst = true
		return nil
	}
	need := func() error {
		if !hasVal || strings.TrimSpace(val) == "" {
			return fmt.Errorf("option %q needs a value (%s=...)", key, key)
		}
		return nil
	}
	var err error
	switch key {
	case "raw":
		err = flag(&t.raw)
	case "angle":
		err = flag(&t.angle)
	case "quat":
		err = flag(&t.quat)
	case "vel":
		err = flag(&t.vel)
	case "world":
		err = flag(&t.world)
	case "varint":
		err = flag(&t.varint)
	case "owner":
		err = flag(&t.owner)
	case "range":
		if err = need(); err == nil {
			err = t.parseRange(val)
		}
	case "step":
		if err = need(); err == nil {
			t.step, err = parseFloat("step", val)
		}
	case "max":
		if err = need(); err == nil {
			t.limit, err = parseFloat("max", val)
		}
	case "rest":
		if err = need(); err == nil {
			t.rest, err = parseFloat("rest", val)
		}
	case "bits", "cell":
		if err = need(); err != nil {
			break
		}
		n, perr := strconv.Atoi(strings.TrimSpace(val))
		if perr != nil || n <= 0 || n > 64 {
			err = fmt.Errorf("%s=%q must be an integer in 1..64", key, val)
			break
		}
		if key == "bits" {
			t.bits = n
		} else {
			t.cellBits = n
		}
	default:
		err = fmt.Errorf("unknown option %q", key)
	}
	return err
}

// parseRange applies range=val (MIN:MAX) to t.
func (t *tag) parseRange(val string) error {
	lo, hi, ok := strings.Cut(val, ":")
	if !ok {
		return fmt.Errorf("range %q must be MIN:MAX", val)
	}
	var err error
	if t.min, err = parseFloat("range", lo); err != nil {
		return err
	}
	if t.max, err = parseFloat("range", hi); err != nil {
		return err
	}
	t.hasRange = true
	il, e1 := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
	ih, e2 := strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
	if e1 == nil && e2 == nil {
		t.imin, t.imax, t.intRange = il, ih, true
	}
	return nil
}
