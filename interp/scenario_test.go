package interp_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
)

// TestScenarioCircle is the acceptance scenario: 30 Hz snapshots, 60 Hz
// frames, 50 ms latency, ±20 ms uniform jitter, 5% loss, an entity on a
// circle of radius R = 10 m at ω = 1 rad/s (speed v = 10 m/s, acceleration
// M = Rω² = 10 m/s²).
//
// Derived bounds. Linear interpolation between samples t0, t1 of a path p
// errs by at most (M/2)·|(t−t0)(t−t1)| (Lagrange remainder; its Peano kernel
// has one sign, so it holds for the vector norm):
//   - interpolating across a gap g:  ≤ M·g²/8;
//   - extrapolating e past t1 with gap g behind it: ≤ (M/2)·e·(e+g).
//
// With at most G = (L+1)·T between received snapshots (L = longest run of
// losses, checked below to be ≤ 2, so G ≤ 3T = 100 ms) and extrapolation
// capped at E = 100 ms:
//
//	interpolating frames:   |err| ≤ M·G²/8        = 12.5 mm
//	any frame (bound B):    |err| ≤ (M/2)·E·(E+G) = 100 mm
//
// Against the nominal path position at (now − latency − target delay) the
// render time may lag or lead by the clock's tracking error δ: the offset
// estimate (EWMA gain 1/16 of uniform ±20 ms jitter, σ = 11.5 ms) has
// σ·√(g/(2−g)) ≈ 2.0 ms standard deviation, 4σ ≈ 8 ms, and the controller
// follows target changes (k·Δjitter, ≈ 3 ms per σ of the jitter EWMA) with a
// 0.5 s time constant; δ ≤ 20 ms gives the bound B + v·δ = 300 mm.
//
// Frame-to-frame: |visualₙ − visualₙ₋₁| ≤ |p(rₙ) − p(rₙ₋₁)| + B, the true
// motion over the render-time step plus the error bound.
func TestScenarioCircle(t *testing.T) {
	const (
		interval = time.Second / 30
		frame    = time.Second / 60
		latency  = 50 * time.Millisecond
		jitter   = 20 * time.Millisecond
		loss     = 0.05
		duration = 30 * time.Second
		warmup   = 2 * time.Second

		accel     = circleR * circleOmega * circleOmega // M
		speed     = circleR * circleOmega               // v
		maxExtrap = 0.1                                 // E, seconds
	)
	T := interval.Seconds()
	G := 3 * T
	boundInterp := accel * G * G / 8
	boundAny := accel / 2 * maxExtrap * (maxExtrap + G)
	boundNominal := boundAny + speed*0.020

	net := newLink(42, interval, latency, jitter, loss)
	c := newClient(t, interp.ClockConfig{TickInterval: interval})

	var (
		frames, interpFrames, extrapFrames, otherFrames int
		maxErr, sumErr, maxInterpErr, maxExtrapErr      float64
		maxNomErr, sumNomErr, maxRotErr, maxStepExcess  float64
		sumDelay                                        time.Duration
		prevVis                                         components.Visual
		prevR                                           float64
		havePrev                                        bool
	)
	for n := 0; ; n++ {
		// Frames are not aligned with ticks: a 3.7 ms phase.
		now := epoch.Add(time.Duration(n)*frame + 3700*time.Microsecond)
		if now.Sub(epoch) > duration {
			break
		}
		vis := c.frame(now, net.deliver(now), interval)
		if now.Sub(epoch) < warmup {
			continue
		}
		r := c.clock.RenderTick() * T // render time, seconds of server time
		st := c.sys.Stats()
		err := vis.Pos.Sub(truePos(r)).Len()
		frames++
		sumErr += err
		maxErr = max(maxErr, err)
		switch {
		case st.Interpolating == 1:
			interpFrames++
			maxInterpErr = max(maxInterpErr, err)
		case st.Extrapolating == 1:
			extrapFrames++
			maxExtrapErr = max(maxExtrapErr, err)
		default:
			otherFrames++
		}
		maxRotErr = max(maxRotErr, vis.Rot.AngleTo(trueRot(r)))

		nominal := (now.Sub(epoch) - latency - c.clock.TargetDelay()).Seconds()
		nomErr := vis.Pos.Sub(truePos(nominal)).Len()
		sumNomErr += nomErr
		maxNomErr = max(maxNomErr, nomErr)
		sumDelay += c.clock.Delay()

		if havePrev {
			step := vis.Pos.Sub(prevVis.Pos).Len()
			trueStep := truePos(r).Sub(truePos(prevR)).Len()
			maxStepExcess = max(maxStepExcess, step-trueStep)
		}
		prevVis, prevR, havePrev = vis, r, true
	}

	require.LessOrEqual(t, net.longestLossRun(), 2, "the derivation assumes G ≤ 3T")
	t.Logf("frames %d: interpolating %d, extrapolating %d, other %d; longest loss run %d; resets %d",
		frames, interpFrames, extrapFrames, otherFrames, net.longestLossRun(), c.clock.Resets())
	t.Logf("error vs path at render time: mean %.2f mm, max %.2f mm (interp max %.2f mm ≤ %.1f, extrap max %.2f mm ≤ %.0f)",
		1e3*sumErr/float64(frames), 1e3*maxErr, 1e3*maxInterpErr, 1e3*boundInterp, 1e3*maxExtrapErr, 1e3*boundAny)
	t.Logf("error vs path at now−latency−target delay: mean %.1f mm, max %.1f mm (≤ %.0f)",
		1e3*sumNomErr/float64(frames), 1e3*maxNomErr, 1e3*boundNominal)
	t.Logf("rotation max error %.2e rad; max step excess over true step %.2f mm; mean delay %v, target %v, jitter %v, loss %.3f",
		maxRotErr, 1e3*maxStepExcess, sumDelay/time.Duration(frames), c.clock.TargetDelay(), c.clock.Jitter(), c.clock.Loss())

	assert.Zero(t, otherFrames, "after warm-up no frame holds or is empty")
	assert.Zero(t, c.clock.Resets())
	assert.Greater(t, interpFrames, 9*frames/10, "the delay keeps nearly every frame interpolating")
	assert.LessOrEqual(t, maxInterpErr, boundInterp)
	assert.LessOrEqual(t, maxErr, boundAny)
	assert.LessOrEqual(t, maxNomErr, boundNominal)
	assert.LessOrEqual(t, maxStepExcess, boundAny)
	assert.LessOrEqual(t, maxRotErr, 1e-3, "slerp of a constant-axis rotation is exact up to nlerp's small-angle error")
}

// TestExtrapolationIsBounded stops the stream of an entity moving at 10 m/s
// and checks it coasts exactly 100 ms (1 m) past the last snapshot, then
// holds still.
func TestExtrapolationIsBounded(t *testing.T) {
	const interval = time.Second / 30
	c := newClient(t, interp.ClockConfig{TickInterval: interval})
	lastTick := uint32(45)
	modes := map[interp.Mode]int{}
	var held []float64
	var maxX float64
	for n := 0; n < 180; n++ { // 3 s of frames
		now := epoch.Add(time.Duration(n) * time.Second / 60)
		buf, vis := c.buf.Get(c.entity)
		// Deliver the snapshots due by now with 50 ms latency, up to lastTick.
		for k := uint32(0); k <= lastTick; k++ {
			arr := epoch.Add(time.Duration(k)*interval + 50*time.Millisecond)
			if !arr.After(now) && !arr.Before(now.Add(-time.Second/60)) {
				buf.Push(k, vx(10*(time.Duration(k)*interval).Seconds()), components.QuatIdentity())
				c.clock.Observe(k, arr)
			}
		}
		c.clock.Advance(now)
		c.sys.Update(c.world)
		st := c.sys.Stats()
		switch {
		case st.Interpolating == 1:
			modes[interp.ModeInterpolating]++
		case st.Extrapolating == 1:
			modes[interp.ModeExtrapolating]++
		case st.Holding == 1 && modes[interp.ModeExtrapolating] == 0:
			modes[interp.ModeHolding]++ // render time still before the first snapshot
			assert.Equal(t, 0.0, vis.Pos.X, "holds the oldest snapshot")
		case st.Holding == 1:
			held = append(held, vis.Pos.X)
		}
		maxX = max(maxX, vis.Pos.X)
	}
	lastX := 10 * (time.Duration(lastTick) * interval).Seconds() // 15 m
	assert.InDelta(t, lastX+1, maxX, 1e-9, "coasts v × 100 ms = 1 m and no further")
	assert.Positive(t, modes[interp.ModeInterpolating])
	assert.Positive(t, modes[interp.ModeExtrapolating])
	require.NotEmpty(t, held)
	for _, x := range held {
		assert.InDelta(t, lastX+1, x, 1e-9, "holds at the limit")
	}
	// 100 ms of extrapolation at 60 Hz is 6 frames (±1 for the time scale).
	assert.InDelta(t, 6, modes[interp.ModeExtrapolating], 1)
}

// TestDelayConvergesAfterJitterChange switches the jitter from ±20 ms to
// ±5 ms and back. Expected target delay: 2T + 3·(mean absolute deviation) =
// 2T + 3·J/2 for uniform ±J: 66.7 + 30 = 96.7 ms and 66.7 + 7.5 = 74.2 ms.
// The render time must never move by more than the time scale allows
// (|Δrender − dt| ≤ 0.1·dt), and the actual delay must settle on the target.
func TestDelayConvergesAfterJitterChange(t *testing.T) {
	const (
		interval = time.Second / 30
		frame    = time.Second / 60
		phase    = 15 * time.Second
	)
	T := interval.Seconds()
	want := map[time.Duration]float64{
		20 * time.Millisecond: 2*T + 3*0.020/2,
		5 * time.Millisecond:  2*T + 3*0.005/2,
	}
	c := newClient(t, interp.ClockConfig{TickInterval: interval})
	net := newLink(7, interval, 50*time.Millisecond, 20*time.Millisecond, 0)
	jitters := []time.Duration{20 * time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond}

	prevRender := math.NaN()
	var maxScaleDev float64
	n := 0
	for i, j := range jitters {
		net.jitter = j
		var sumTarget, sumDelay float64
		var count int
		settled := time.Duration(-1)
		end := time.Duration(i+1) * phase
		for ; ; n++ {
			at := time.Duration(n) * frame
			if at >= end {
				break
			}
			now := epoch.Add(at)
			c.frame(now, net.deliver(now), interval)
			r := c.clock.RenderTick()
			if !c.clock.Ready() {
				continue // the first frame after the first snapshot may jump
			}
			if !math.IsNaN(prevRender) {
				dev := math.Abs((r-prevRender)*T-frame.Seconds()) / frame.Seconds()
				maxScaleDev = max(maxScaleDev, dev)
			}
			prevRender = r
			inPhase := at - time.Duration(i)*phase
			if settled < 0 && i > 0 && math.Abs(c.clock.Delay().Seconds()-want[j]) < 0.003 {
				settled = inPhase
			}
			if inPhase >= phase-5*time.Second {
				sumTarget += c.clock.TargetDelay().Seconds()
				sumDelay += c.clock.Delay().Seconds()
				count++
			}
		}
		meanTarget, meanDelay := sumTarget/float64(count), sumDelay/float64(count)
		t.Logf("jitter ±%v: target delay %.1f ms (expected %.1f), actual %.1f ms, jitter estimate %v, settled within 3 ms after %v",
			j, 1e3*meanTarget, 1e3*want[j], 1e3*meanDelay, c.clock.Jitter(), settled)
		assert.InDelta(t, want[j], meanTarget, 0.004, "jitter ±%v", j)
		assert.InDelta(t, meanTarget, meanDelay, 0.002, "jitter ±%v: actual delay follows the target", j)
		if i > 0 {
			assert.True(t, settled >= 0 && settled < 6*time.Second, "settled after %v", settled)
		}
	}
	t.Logf("max |time scale − 1| = %.4f", maxScaleDev)
	assert.LessOrEqual(t, maxScaleDev, 0.1+1e-9, "no jump beyond the time-scale limit")
	assert.Zero(t, c.clock.Resets())
}
