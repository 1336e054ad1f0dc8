package debugview

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"strconv"
)

//go:embed page.html
var page []byte

// Handler returns the debugger's HTTP handler over r:
//
//	GET /                 the page (HTML, no external assets)
//	GET /stats?since=N    Stats as JSON: the samples after sequence number N (all without it)
//
// It reads only r's history, never the server, so it is safe to serve
// from any goroutine while the server ticks. To mount it under a prefix,
// strip it: mux.Handle("/debug/", http.StripPrefix("/debug", h)) (the page
// fetches "stats" relative to its own address).
func Handler(r *Recorder) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		// The page is self-contained: nothing may load from elsewhere.
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, req *http.Request) {
		var since uint64
		if v := req.URL.Query().Get("since"); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				http.Error(w, "since: want a sample sequence number", http.StatusBadRequest)
				return
			}
			since = n
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(r.Stats(since))
	})
	return mux
}
