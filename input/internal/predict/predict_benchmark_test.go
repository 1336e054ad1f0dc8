package predict

import "testing"

// BenchmarkPredict: one predicted tick (step + rounding + history).
func BenchmarkPredict(b *testing.B) {
	b.ReportAllocs()
	p, _ := newPlayerPredictorB(b)
	in := fpsInput{Keys: keyFwd, DX: 2}
	tick := uint32(1)
	for b.Loop() {
		p.Predict(tick, &in)
		tick++
	}
}

// BenchmarkReconcileReplay: a correction replaying 9 ticks (150 ms at 60 Hz).
func BenchmarkReconcileReplay(b *testing.B) {
	b.ReportAllocs()
	p, _ := newPlayerPredictorB(b)
	in := fpsInput{Keys: keyFwd, DX: 2}
	for tick := uint32(1); tick <= 10; tick++ {
		p.Predict(tick, &in)
	}
	auth := player{X: 1}
	tick := uint32(10)
	for b.Loop() {
		tick++
		p.Predict(tick, &in)
		auth.X = -auth.X
		if c := p.Reconcile(tick-9, tick-9, &auth); c.Status != Corrected {
			b.Fatal(c.Status)
		}
	}
}
