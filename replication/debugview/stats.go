package debugview

import "github.com/archenet/archenet/replication"

// Stats is what GET /stats returns (as JSON): the recorder's settings and
// its samples, oldest first.
type Stats struct {
	IntervalMS float64 `json:"interval_ms"` // between samples
	WindowS    float64 `json:"window_s"`    // history kept
	// Components names the replicated component types, in registry order:
	// Sample.ComponentBps and ComponentBytes are indexed the same way.
	Components []string `json:"components"`
	// ComponentBits says whether the server's bit accounting is on (else
	// the samples have no bytes per component).
	ComponentBits bool     `json:"component_bits"`
	Seq           uint64   `json:"seq"` // of the newest sample (0: none yet)
	Samples       []Sample `json:"samples"`
}

// Sample is the server's state over one sampling interval. Rates are per
// second of the recorder's clock; "per tick" figures are per net tick (per
// Server.Send) and summed over clients.
type Sample struct {
	Seq      uint64  `json:"seq"`
	T        float64 `json:"t"`         // seconds since the first Sample call
	Tick     uint32  `json:"tick"`      // the server's net tick
	NetTicks int     `json:"net_ticks"` // net ticks in the interval

	// Bytes down, all clients: snapshot datagrams and spawn/despawn
	// messages, per second, and since start.
	SnapshotBps float64 `json:"snapshot_bps"`
	SpawnBps    float64 `json:"spawn_bps"`
	SnapshotB   uint64  `json:"snapshot_bytes"`
	SpawnB      uint64  `json:"spawn_bytes"`

	// Records per net tick by kind, records the budgets deferred, and
	// snapshot datagrams.
	Deltas    float64 `json:"deltas"`
	Fulls     float64 `json:"fulls"`
	Removals  float64 `json:"removals"`
	Deferred  float64 `json:"deferred"`
	Datagrams float64 `json:"datagrams"`

	// ComponentBps is the snapshot bytes per second per component type
	// (exact bits ÷ 8 as the encoder wrote them, before compression);
	// ComponentBytes the same since accounting started. FramingBps is the
	// records' framing, HeaderBps the datagram headers, UnattributedBps
	// records encoded before accounting was on. Empty without accounting.
	ComponentBps    []float64 `json:"component_bps,omitempty"`
	ComponentBytes  []uint64  `json:"component_bytes,omitempty"`
	FramingBps      float64   `json:"framing_bps"`
	HeaderBps       float64   `json:"header_bps"`
	UnattributedBps float64   `json:"unattributed_bps"`

	// SendMS is the server's Send time per net tick (frame and per-client
	// building: ServerStats.BuildFrame + BuildClients). TickMS and
	// TickMaxMS are the mean and largest game tick time reported through
	// Recorder.TickTime (HasTickTime false: none reported).
	SendMS      float64 `json:"send_ms"`
	TickMS      float64 `json:"tick_ms"`
	TickMaxMS   float64 `json:"tick_max_ms"`
	HasTickTime bool    `json:"has_tick_time"`

	Connected    int `json:"connected"` // since start
	Disconnected int `json:"disconnected"`
	Rejected     int `json:"rejected"`
	// Seats: clients whose connection was lost and whose seat the server
	// keeps now (SeatsSuspended), and since start the seats suspended,
	// resumed and expired (ServerStats.Suspended, Resumed, SeatsExpired).
	SeatsSuspended int `json:"seats_suspended"`
	Suspended      int `json:"suspended"`
	Resumed        int `json:"resumed"`
	SeatsExpired   int `json:"seats_expired"`

	Clients []ClientSample `json:"clients"`
	// Clamps is the quantization clamp counts since start per component
	// field (Server.Clamps); fields never clamped are left out.
	Clamps []Clamp `json:"clamps"`
}

// ClientSample is one client at the end of a sample: connected, or
// suspended (its seat kept for it to come back).
type ClientSample struct {
	ID        replication.ClientID `json:"id"`
	Ready     bool                 `json:"ready"`
	Suspended bool                 `json:"suspended"`
	// DownBps is the client's snapshot and spawn bytes per second over the
	// interval (0 in its first sample).
	DownBps    float64 `json:"down_bps"`
	BudgetBps  int     `json:"budget_bps"` // the adaptive byte budget
	RTTMS      float64 `json:"rtt_ms"`     // transport RTT
	AckDelayMS float64 `json:"ack_delay_ms"`
	Loss       float64 `json:"loss"` // fraction of snapshots not acked, recent window
	Relevant   int     `json:"relevant"`
	Spawned    int     `json:"spawned"`
	// SendDropped counts datagrams the transport dropped before they left;
	// Backlog is the reliable bytes waiting for the peer.
	SendDropped uint64 `json:"send_dropped"`
	Backlog     int    `json:"backlog"`
}

// Clamp is one field's clamp counts (schema.ClampCount).
type Clamp struct {
	Component  string `json:"component"`
	Field      string `json:"field"`
	OutOfRange uint64 `json:"out_of_range"`
	NaN        uint64 `json:"nan"`
	Inf        uint64 `json:"inf"`
}
