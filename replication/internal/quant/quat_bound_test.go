package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// quatRoundTripError returns the rotation angle in radians between unit
// quaternion v and its round trip through qc.
func quatRoundTripError(qc *Quat, v [4]float64) float64 {
	l, a, b, c := qc.Quantize(v[0], v[1], v[2], v[3])
	x, y, z, w := qc.Dequantize(l, a, b, c)
	return QuatAngle(v[0], v[1], v[2], v[3], x, y, z, w)
}

// quatWith places the dropped component l at index pos among the sent ones
// p, r, s (in order), negating all four if neg.
func quatWith(p, r, s, l float64, pos int, neg bool) [4]float64 {
	c := [3]float64{p, r, s}
	var v [4]float64
	for i, j := 0, 0; i < 4; i++ {
		if i == pos {
			v[i] = l
			continue
		}
		v[i] = c[j]
		j++
	}
	if neg {
		for i := range v {
			v[i] = -v[i]
		}
	}
	return v
}

// quatAdversary tracks the worst round-trip error over the inputs it is fed.
type quatAdversary struct {
	t     *testing.T
	qc    *Quat
	bound float64
	worst float64
	at    [4]float64
	n     int
}

// try feeds (p, r, s) with the dropped component rebuilt to unit length, if
// it is the largest; it reports whether it did.
func (a *quatAdversary) try(p, r, s float64, pos int, neg bool) bool {
	n2 := p*p + r*r + s*s
	if n2 >= 1 {
		return false
	}
	l := math.Sqrt(1 - n2)
	if l < max(math.Abs(p), math.Abs(r), math.Abs(s)) {
		return false
	}
	a.feed(quatWith(p, r, s, l, pos, neg))
	return true
}

func (a *quatAdversary) feed(v [4]float64) {
	a.n++
	e := quatRoundTripError(a.qc, v)
	if e > a.bound {
		a.t.Errorf("%d bits: error %.6f° at %v exceeds MaxError %.6f°", a.qc.Bits(), e*180/math.Pi, v, a.bound*180/math.Pi)
	}
	if e > a.worst {
		a.worst, a.at = e, v
	}
}

// TestQuatWorstCaseBound feeds the smallest-three codec the inputs where its
// error peaks and checks that Quat.MaxError bounds them and is tight: the
// search must come within 2% of it, so an understated or a loose bound fails.
//
// The adversarial inputs (see the Quat doc for the analysis behind them):
//   - the worst family: a near-tie between the dropped component and a sent
//     one (≈ 0.5615 each), the other two ≈ ±0.4298 on half steps; scanning
//     their codes sweeps the tied component's offset through its step;
//   - half-step offset grids at the first-order maxima, all four ≈ ½ and
//     two ≈ 1/√2 (ties with the dropped one slightly above, equal or below);
//   - near-ties of the two largest anywhere, and random rotations, from a
//     seeded generator.
func TestQuatWorstCaseBound(t *testing.T) {
	widths := []uint{8, 9, 10, 12}
	random := 100_000
	if testing.Short() {
		widths, random = []uint{9, 10}, 20_000
	}
	const h = math.Sqrt2 / 2
	for _, bits := range widths {
		qc, err := NewQuat(bits)
		if err != nil {
			t.Fatal(err)
		}
		step := qc.c.step
		a := &quatAdversary{t: t, qc: &qc, bound: qc.MaxError()}
		rng := rand.New(rand.NewPCG(2024, uint64(bits)))
		// value returns the input at offset f (in steps) from code k.
		value := func(k, f float64) float64 { return -h + (k+f)*step }

		// Near-tie family: p and r just inside half steps, s a hair below
		// the dropped component.
		kc := math.Round((h - 0.4298) / step)
		const eta = 1e-9
		for d1 := -100.0; d1 <= 100; d1++ {
			for d2 := -100.0; d2 <= 100; d2++ {
				for sg := 0; sg < 4; sg++ {
					f1, f2 := 0.5-eta, 0.5-eta
					if sg&1 != 0 {
						f1 = -f1
					}
					if sg&2 != 0 {
						f2 = -f2
					}
					p, r := value(kc+d1, f1), value(kc+d2, f2)
					s := math.Sqrt((1-p*p-r*r)/2) - 1e-6*step
					a.try(p, r, s, int(d1+d2)&3, sg == 3)
				}
			}
		}

		// Half-step grids at the first-order maxima: all four ≈ ½ (the
		// sent ones of either sign) and the tie at 1/√2.
		offs := []float64{-0.5 + eta, -0.25, 0, 0.25, 0.5 - eta}
		kh := math.Round((h + 0.5) / step)
		kt := math.Round(2 * h / step)
		kz := math.Round(h / step)
		for dk := -2.0; dk <= 2; dk++ {
			for _, fp := range offs {
				for _, fr := range offs {
					for _, fs := range offs {
						for sg := 0; sg < 8; sg++ {
							p, r, s := value(kh+dk, fp), value(kh, fr), value(kh-dk, fs)
							if sg&1 != 0 {
								p = -p
							}
							if sg&2 != 0 {
								r = -r
							}
							if sg&4 != 0 {
								s = -s
							}
							a.try(p, r, s, sg&3, sg&4 != 0)
						}
						// Tie at 1/√2: the top codes minus dk, two near 0.
						a.try(value(kt-dk-1, fp+0.5), value(kz, fr), value(kz+dk, fs), int(dk+2)&3, fp < 0)
					}
				}
			}
		}

		// Near-ties of the two largest anywhere: the dropped one above,
		// equal to or (so the sent one is dropped) below the other.
		for i := 0; i < random; i++ {
			p := (rng.Float64()*2 - 1) * 0.6
			r := (rng.Float64()*2 - 1) * 0.6
			g := (rng.Float64()*2 - 1) * 2 * step
			rest := 1 - p*p - r*r
			if rest <= 0 {
				continue
			}
			// l = s + g with l² + s² = rest.
			s := (-g + math.Sqrt(2*rest-g*g)) / 2
			if math.IsNaN(s) {
				continue
			}
			a.feed(quatWith(p, r, s, s+g, rng.IntN(4), rng.IntN(2) == 0))
		}

		// Random rotations.
		for i := 0; i < random; i++ {
			x, y, z, w := randomUnitQuat(rng)
			a.feed([4]float64{x, y, z, w})
		}

		ratio := a.worst / a.bound
		t.Logf("%d bits: %d inputs, worst %.4f° at %.6f = %.4f of MaxError %.4f°", bits, a.n, a.worst*180/math.Pi, a.at, ratio, a.bound*180/math.Pi)
		if ratio < 0.98 {
			t.Errorf("%d bits: the adversarial search reached only %.4f of MaxError: the bound is loose", bits, ratio)
		}
	}
}

// The documented figures.
func TestQuatMaxErrorFigures(t *testing.T) {
	for _, c := range []struct {
		bits uint
		deg  float64
	}{{9, 0.3349}, {10, 0.1671}} {
		qc, err := NewQuat(c.bits)
		if err != nil {
			t.Fatal(err)
		}
		if got := qc.MaxError() * 180 / math.Pi; math.Abs(got-c.deg) > 0.0001 {
			t.Errorf("%d bits: MaxError %.5f°, documented %.4f°", c.bits, got, c.deg)
		}
	}
}
