package host

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Live reports whether the host is alive (liveness): nil, or an error
// saying why not. The host is not live when its own loop has not run for
// more than Config.StallAfter (not checked in Manual mode) or, with
// Config.KeepStalled, while a match is stuck in a frame, or without one,
// for more than StallAfter. (Without KeepStalled such a match is ended and
// the host stays live for the others.) A host whose process should be
// replaced is not live.
func (h *Host) Live() error {
	now := time.Now()
	if !h.cfg.Manual && !h.closedOrDone() {
		if d := now.Sub(time.Unix(0, h.heartbeat.Load())); d > h.cfg.StallAfter {
			return fmt.Errorf("host: stalled: its loop has not run for %v", d.Round(time.Millisecond))
		}
	}
	if !h.cfg.KeepStalled {
		return nil
	}
	var stuck []string
	for _, m := range h.Matches() {
		if d := m.stalled(now, h.cfg.StallAfter); d > 0 {
			stuck = append(stuck, fmt.Sprintf("%s (no frame done for %v)", m.name, d.Round(time.Millisecond)))
		}
	}
	if len(stuck) > 0 {
		return fmt.Errorf("host: stalled: %s", strings.Join(stuck, ", "))
	}
	return nil
}

// closedOrDone reports whether the host was closed (its loop stopped).
func (h *Host) closedOrDone() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state == closed
}

// Handler serves the host's probes for Kubernetes and its figures:
//
//	GET /healthz   200 "ok" while the host is live (Live), else 503 and why
//	GET /readyz    200 "admitting" while the host admits clients, else 503 ("draining", "closed")
//	GET /stats     the host's Stats as JSON
//
// It has no authentication: serve it on a loopback or cluster-internal
// address (a port alone should bind 127.0.0.1, as the examples do).
func (h *Host) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := h.Live(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !h.Admitting() {
			state := "draining"
			if h.drain.Load() == nil {
				state = "closed"
			}
			http.Error(w, state, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "admitting")
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(h.Stats())
	})
	return mux
}
