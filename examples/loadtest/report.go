package main

import (
	"fmt"
	"io"
	"runtime"
	"time"
)

// Report holds the figures of one run. KB is 1000 bytes; bytes are payload
// bytes handed to the transport (snapshot datagrams and reliable
// spawn/despawn messages downstream, ack datagrams upstream), not counting
// QUIC/UDP/IP headers.
type Report struct {
	RunReport
	BandwidthReport
	TimingReport
	BytesReport
	OutcomeReport
	FidelityReport
	*TraceReport
}

// RunReport is a run's configuration.
type RunReport struct {
	Transport       string  `json:"transport"`
	Clients         int     `json:"clients"`
	Entities        int     `json:"entities"` // scene entities (trace: most bodies in a frame), not counting avatars
	Avatars         int     `json:"avatars"`
	MovingFraction  float64 `json:"moving_fraction"`
	WorldM          float64 `json:"world_m"`
	InterestRadiusM float64 `json:"interest_radius_m"`
	Ticks           int     `json:"ticks"` // measured net ticks
	NetRateHz       int     `json:"net_rate_hz"`
	Loss            float64 `json:"loss"`
	LatencyMs       float64 `json:"latency_ms"`
	JitterMs        float64 `json:"jitter_ms"`
	Seed            int64   `json:"seed"`
	JoinTicks       int     `json:"join_ticks"`   // ticks until every client was ready (not measured)
	SettleTicks     int     `json:"settle_ticks"` // ticks without loss and movement before the convergence check
}

// BandwidthReport is what the clients received and sent, per second.
type BandwidthReport struct {
	MirrorsPerClient float64 `json:"mirrors_per_client_mean"`

	DownKBpsMean float64 `json:"down_kbytes_per_s_mean"`
	DownKBpsP99  float64 `json:"down_kbytes_per_s_p99"` // over one-second windows of every client
	UpKBpsMean   float64 `json:"up_kbytes_per_s_mean"`
	UpKBpsP99    float64 `json:"up_kbytes_per_s_p99"`
}

// TimingReport is the server's time per tick.
type TimingReport struct {
	Workers             int     `json:"workers"`                     // ServerConfig.Workers (0: GOMAXPROCS)
	ServerMsMean        float64 `json:"server_ms_per_tick_mean"`     // srv.Receive + srv.Send, wall time
	ServerCPUMsMean     float64 `json:"server_cpu_ms_per_tick_mean"` // CPU time of them: the caller's goroutine and the worker helpers (ServerStats.HelperTime)
	ServerMsP99         float64 `json:"server_ms_per_tick_p99"`
	ServerMsMax         float64 `json:"server_ms_per_tick_max"` // the worst tick
	ReceiveMsMean       float64 `json:"receive_ms_per_tick_mean"`
	SendMsMean          float64 `json:"send_ms_per_tick_mean"`
	SnapshotBuildMsMean float64 `json:"snapshot_build_ms_per_tick_mean"` // ServerStats.BuildFrame
	SnapshotBuildMsP99  float64 `json:"snapshot_build_ms_per_tick_p99"`
	ClientBuildMsMean   float64 `json:"client_build_ms_per_tick_mean"` // ServerStats.BuildClients: interest, spawns, datagrams, sends
	ClientBuildMsP99    float64 `json:"client_build_ms_per_tick_p99"`
	ClientBuildUsPerCl  float64 `json:"client_build_us_per_client_mean"`
	SnapshotNsPerEntity float64 `json:"snapshot_ns_per_entity"`
}

// BytesReport is the snapshots' size and what they carried.
type BytesReport struct {
	BytesPerTickP50      float64 `json:"bytes_per_tick_p50"` // snapshot bytes a client received per net tick
	BytesPerTickP99      float64 `json:"bytes_per_tick_p99"`
	BytesPerTickMax      float64 `json:"bytes_per_tick_max"`
	DatagramsPerTickMean float64 `json:"datagrams_per_tick_mean"`
	DatagramsPerTickMax  float64 `json:"datagrams_per_tick_max"`

	BytesPerEntityUpdate   float64 `json:"bytes_per_entity_update"`
	UpdatesPerClientPerTic float64 `json:"entity_updates_per_client_per_tick"`
	SnapshotBytes          uint64  `json:"snapshot_bytes"`
	SpawnBytes             uint64  `json:"spawn_bytes"`
	SpawnsSent             uint64  `json:"spawns_sent"`
	DespawnsSent           uint64  `json:"despawns_sent"`
	SpawnsApplied          uint64  `json:"spawns_applied"`
	DespawnsApplied        uint64  `json:"despawns_applied"`
	DatagramsDropped       uint64  `json:"datagrams_dropped"`         // by the clients' decoders (missing baseline, ...)
	RecordsDeferred        uint64  `json:"records_deferred"`          // changed records a client's budget left for a later tick
	SharedBuildFraction    float64 `json:"shared_build_fraction"`     // clients' snapshot ticks that copied another client's datagrams (ServerStats.SharedBuilds)
	SharedCandsFraction    float64 `json:"shared_cands_fraction"`     // clients' snapshot ticks that took another client's records but their own of entities with owner-only fields (ServerStats.SharedCandidates)
	HeaderBytesPerDatagram float64 `json:"header_bytes_per_datagram"` // kind byte and header, mean
}

// OutcomeReport is the run's memory, its wall time and whether the
// clients converged.
type OutcomeReport struct {
	HeapMB float64 `json:"heap_mbytes"` // HeapInuse of the whole process (server and every client world)
	// StateKBPerClient is the server's replication state per client
	// (ClientInfo.StateBytes): mean and largest.
	StateKBPerClient    float64 `json:"server_state_kbytes_per_client_mean"`
	StateKBPerClientMax float64 `json:"server_state_kbytes_per_client_max"`
	WallSeconds         float64 `json:"wall_seconds"`
	GoVersion           string  `json:"go_version"`

	Converged     bool   `json:"converged"`
	ConvergeError string `json:"converge_error,omitempty"`
}

// TraceReport holds the figures of a trace replay (its fidelity is in
// FidelityReport). Settled errors are of every mirror after the settle
// ticks, against the last frame.
type TraceReport struct {
	Trace             string  `json:"trace"`
	TraceRateHz       int     `json:"trace_rate_hz"`
	TraceFrames       int     `json:"trace_frames"`
	DownKbitPerS      float64 `json:"down_kbit_per_s"`
	SettledPosErrMaxM float64 `json:"settled_pos_err_max_m"`
	SettledRotErrMax  float64 `json:"settled_rot_err_max_deg"`
}

// fill sets the configuration and the measured window's figures;
// replicated is the number of server entities.
func (rep *Report) fill(r *rig, m *meter, entities, replicated int) {
	c := r.cfg
	rep.Transport, rep.Clients, rep.Entities = c.Transport, c.Clients, entities
	rep.MovingFraction, rep.WorldM, rep.InterestRadiusM = c.Moving, c.World, c.Interest
	rep.Ticks, rep.NetRateHz, rep.Loss, rep.Seed = m.ticks, c.Rate, c.Loss, c.Seed
	rep.LatencyMs, rep.JitterMs = ms(c.Latency), ms(c.Jitter)
	rep.DownKBpsMean, rep.DownKBpsP99, rep.UpKBpsMean, rep.UpKBpsP99 = m.rates(r)
	server := make([]float64, len(m.recv))
	for i := range server {
		server[i] = m.recv[i] + m.send[i]
	}
	rep.ServerMsMean, rep.ServerMsP99, rep.ServerMsMax = mean(server), percentile(server, 0.99), percentile(server, 1)
	rep.ServerCPUMsMean, rep.Workers = mean(m.cpu), c.Workers
	rep.ReceiveMsMean, rep.SendMsMean = mean(m.recv), mean(m.send)
	rep.SnapshotBuildMsMean, rep.SnapshotBuildMsP99 = mean(m.frame), percentile(m.frame, 0.99)
	rep.ClientBuildMsMean, rep.ClientBuildMsP99 = mean(m.clients), percentile(m.clients, 0.99)
	rep.ClientBuildUsPerCl = rep.ClientBuildMsMean * 1000 / float64(c.Clients)
	if replicated > 0 {
		rep.SnapshotNsPerEntity = rep.SnapshotBuildMsMean * 1e6 / float64(replicated)
	}
	if m.records > 0 {
		rep.BytesPerEntityUpdate = float64(m.recBytes) / float64(m.records)
	}
	rep.BytesPerTickP50, rep.BytesPerTickP99 = percentile(m.tickBytes, 0.5), percentile(m.tickBytes, 0.99)
	rep.BytesPerTickMax = percentile(m.tickBytes, 1)
	rep.DatagramsPerTickMean, rep.DatagramsPerTickMax = mean(m.tickDatagrams), percentile(m.tickDatagrams, 1)
	if r.fid != nil {
		rep.FidelityReport = r.fid.report()
	}
	if m.samples > 0 {
		rep.UpdatesPerClientPerTic = float64(m.records) / float64(m.samples)
	}
}

// finish fills the cumulative counters at the end of the run.
func (rep *Report) finish(r *rig, start time.Time) {
	st := r.srv.Stats
	rep.SnapshotBytes, rep.SpawnBytes = st.SnapshotBytes, st.SpawnBytes
	rep.SpawnsSent, rep.DespawnsSent = st.Spawns, st.Despawns
	rep.RecordsDeferred = st.Deferred
	if st.Builds > 0 {
		rep.SharedBuildFraction = float64(st.SharedBuilds) / float64(st.Builds)
		rep.SharedCandsFraction = float64(st.SharedCandidates) / float64(st.Builds)
	}
	if st.SnapshotDatagrams > 0 {
		rep.HeaderBytesPerDatagram = float64(st.SnapshotHeaderBits) / 8 / float64(st.SnapshotDatagrams)
	}
	mirrors := 0
	for _, p := range r.peers {
		rep.SpawnsApplied += p.c.Stats.Spawns
		rep.DespawnsApplied += p.c.Stats.Despawns
		rep.DatagramsDropped += p.c.Stats.DatagramsDropped
		mirrors += p.c.Mirrors()
	}
	rep.MirrorsPerClient = float64(mirrors) / float64(len(r.peers))
	state, n := 0, 0
	for _, p := range r.peers {
		if ci, ok := r.srv.Client(p.c.ID()); ok && p.c.ID() != 0 {
			state += ci.StateBytes
			n++
			rep.StateKBPerClientMax = max(rep.StateKBPerClientMax, float64(ci.StateBytes)/1e3)
		}
	}
	if n > 0 {
		rep.StateKBPerClient = float64(state) / 1e3 / float64(n)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.HeapMB = float64(ms.HeapInuse) / 1e6
	rep.WallSeconds = time.Since(start).Seconds()
	rep.GoVersion = runtime.Version()
}

// WriteText writes the report for people.
func (rep *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "archenet load test: %s, %d clients, %d entities (+%d avatars), %.0f%% moving, world %.0f m, interest %.0f m, %d Hz, %d ticks\n",
		rep.Transport, rep.Clients, rep.Entities, rep.Avatars, rep.MovingFraction*100, rep.WorldM, rep.InterestRadiusM, rep.NetRateHz, rep.Ticks)
	if rep.Transport == "sim" {
		fmt.Fprintf(w, "  link: loss %.1f%%, latency %.0f ms, jitter %.0f ms (each way), seed %d\n", rep.Loss*100, rep.LatencyMs, rep.JitterMs, rep.Seed)
	}
	fmt.Fprintf(w, "  per client:  down %.2f KB/s mean, %.2f p99   up %.2f KB/s mean, %.2f p99   %.0f mirrors\n",
		rep.DownKBpsMean, rep.DownKBpsP99, rep.UpKBpsMean, rep.UpKBpsP99, rep.MirrorsPerClient)
	fmt.Fprintf(w, "  server/tick: %.3f ms mean, %.3f ms p99, %.3f ms worst (receive %.3f, send %.3f); CPU %.3f ms with %s\n",
		rep.ServerMsMean, rep.ServerMsP99, rep.ServerMsMax, rep.ReceiveMsMean, rep.SendMsMean, rep.ServerCPUMsMean, workersText(rep.Workers))
	fmt.Fprintf(w, "    snapshot build %.3f ms mean (%.0f ns/entity), per-client packets %.3f ms mean (%.1f µs/client)\n",
		rep.SnapshotBuildMsMean, rep.SnapshotNsPerEntity, rep.ClientBuildMsMean, rep.ClientBuildUsPerCl)
	fmt.Fprintf(w, "  snapshots:   %.2f bytes/entity update, %.1f updates/client/tick; %d B snapshots, %d B spawn messages\n",
		rep.BytesPerEntityUpdate, rep.UpdatesPerClientPerTic, rep.SnapshotBytes, rep.SpawnBytes)
	fmt.Fprintf(w, "    per client and tick: %.0f B p50, %.0f p99, %.0f max; %.2f datagrams mean, %.0f max; header %.1f B per datagram\n",
		rep.BytesPerTickP50, rep.BytesPerTickP99, rep.BytesPerTickMax, rep.DatagramsPerTickMean, rep.DatagramsPerTickMax, rep.HeaderBytesPerDatagram)
	if f := &rep.FidelityReport; f.Samples > 0 {
		fmt.Fprintf(w, "  fidelity:    %d samples, stale %.4f%% (bounds %.2f mm, %.3f°; %d missing mirrors)\n",
			f.Samples, f.StaleFraction*100, f.PosBoundM*1e3, f.RotBoundDeg, f.MissingMirrors)
		fmt.Fprintf(w, "    position error %.3f mm p50, %.3f p99, %.3f max; rotation %.4f° p50, %.4f p99, %.4f max\n",
			f.PosErrP50M*1e3, f.PosErrP99M*1e3, f.PosErrMaxM*1e3, f.RotErrP50Deg, f.RotErrP99Deg, f.RotErrMaxDeg)
	}
	fmt.Fprintf(w, "  structure:   %d spawns / %d despawns sent, %d / %d applied; %d datagrams dropped by decoders; %d records deferred by budgets; %.1f%% of the clients' ticks shared another's build (%.1f%% its records only)\n",
		rep.SpawnsSent, rep.DespawnsSent, rep.SpawnsApplied, rep.DespawnsApplied, rep.DatagramsDropped, rep.RecordsDeferred, rep.SharedBuildFraction*100, rep.SharedCandsFraction*100)
	if t := rep.TraceReport; t != nil {
		fmt.Fprintf(w, "  trace %s: %d frames at %d Hz, %.1f kbit/s per client; settled %.3f mm, %.4f°\n",
			t.Trace, t.TraceFrames, t.TraceRateHz, t.DownKbitPerS, t.SettledPosErrMaxM*1e3, t.SettledRotErrMax)
	}
	fmt.Fprintf(w, "  heap in use %.1f MB (whole process), %.1f s wall; server state per client %.1f KB mean, %.1f max\n",
		rep.HeapMB, rep.WallSeconds, rep.StateKBPerClient, rep.StateKBPerClientMax)
	if rep.Converged {
		fmt.Fprintf(w, "  converged after %d settle ticks\n", rep.SettleTicks)
	} else {
		fmt.Fprintf(w, "  NOT CONVERGED after %d settle ticks: %s\n", rep.SettleTicks, rep.ConvergeError)
	}
}

func workersText(n int) string {
	if n <= 0 {
		return "GOMAXPROCS workers"
	}
	if n == 1 {
		return "1 worker"
	}
	return fmt.Sprintf("%d workers", n)
}
