package host

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Live reports whether every match's frame is advancing (liveness): nil,
// or an error naming the matches stuck in a frame, or without one, for
// more than Config.StallAfter. A host whose process should be replaced is
// not live.
func (h *Host) Live() error {
	now := time.Now()
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

// Handler serves the host's probes for Kubernetes and its figures:
//
//	GET /healthz   200 "ok" while every match's frame advances (Live), else 503 and why
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
