package main

import (
	"slices"
	"time"
)

// meter collects the figures of the measured window: server time per net
// tick, per-client byte rates in one-second windows, and bytes per entity
// record.
type meter struct {
	rate  int
	ticks int

	recv, send, frame, clients []float64 // ms per net tick
	cpu                        []float64 // CPU ms of Receive + Send: the caller's and the helpers' (ServerStats.HelperTime)

	down0, up0 []uint64  // per peer, at the start
	downW, upW []uint64  // per peer, at the start of the current window
	downKBps   []float64 // one sample per client per full second
	upKBps     []float64

	// Bytes and entity records of the client steps whose datagrams all
	// decoded and brought a newer tick (ClientStats.Records).
	recBytes, records, samples uint64

	// Per client step: snapshot bytes and datagrams received.
	tickBytes, tickDatagrams []float64
}

func newMeter(r *rig) *meter {
	m := &meter{rate: r.cfg.Rate}
	for _, p := range r.peers {
		d, u := r.downBytes(p), p.c.Stats.BytesOut
		m.down0, m.up0 = append(m.down0, d), append(m.up0, u)
		m.downW, m.upW = append(m.downW, d), append(m.upW, u)
		p.datagrams, p.dropped, p.bytesIn = p.c.Stats.Datagrams, p.c.Stats.DatagramsDropped, p.c.Stats.DatagramBytesIn
		p.serverTick = p.c.ServerTick()
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func (m *meter) server(recv, send, frame, clients time.Duration) {
	m.recv = append(m.recv, ms(recv))
	m.send = append(m.send, ms(send))
	m.frame = append(m.frame, ms(frame))
	m.clients = append(m.clients, ms(clients))
}

// client runs after p's Receive.
func (m *meter) client(p *peer) {
	st := &p.c.Stats
	dg, drop, in := st.Datagrams-p.datagrams, st.DatagramsDropped-p.dropped, st.DatagramBytesIn-p.bytesIn
	p.datagrams, p.dropped, p.bytesIn = st.Datagrams, st.DatagramsDropped, st.DatagramBytesIn
	m.tickBytes = append(m.tickBytes, float64(in))
	m.tickDatagrams = append(m.tickDatagrams, float64(dg))
	recs := st.Records - p.records
	p.records = st.Records
	tick := p.c.ServerTick()
	if tick == p.serverTick {
		return
	}
	p.serverTick = tick
	// Bytes per record only where this step's datagrams all decoded and
	// brought a newer tick.
	if drop != 0 || dg == 0 {
		return
	}
	n := recs
	m.recBytes += in
	m.records += n
	m.samples++
}

func (m *meter) tickDone(r *rig) {
	m.ticks++
	if m.ticks%m.rate != 0 {
		return
	}
	for i, p := range r.peers {
		d, u := r.downBytes(p), p.c.Stats.BytesOut
		m.downKBps = append(m.downKBps, float64(d-m.downW[i])/1000)
		m.upKBps = append(m.upKBps, float64(u-m.upW[i])/1000)
		m.downW[i], m.upW[i] = d, u
	}
}

// rates returns the mean downstream and upstream KB/s per client over the
// whole window, and the p99 of the one-second samples (the mean if the
// window is shorter than a second).
func (m *meter) rates(r *rig) (downMean, downP99, upMean, upP99 float64) {
	secs := float64(m.ticks) / float64(m.rate) * float64(len(r.peers))
	var down, up uint64
	for i, p := range r.peers {
		down += r.downBytes(p) - m.down0[i]
		up += p.c.Stats.BytesOut - m.up0[i]
	}
	downMean, upMean = float64(down)/1000/secs, float64(up)/1000/secs
	downP99, upP99 = downMean, upMean
	if len(m.downKBps) > 0 {
		downP99, upP99 = percentile(m.downKBps, 0.99), percentile(m.upKBps, 0.99)
	}
	return
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// percentile returns the nearest-rank p-quantile of xs (0 for none).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
