//go:build !js

package webtransport

import (
	"net/http"
)

// EndpointHandler serves the endpoint document a page fetches before it dials: the
// session URL for the host the page was loaded from (sessionURL, e.g.
// [Listener.URL]) and hashes(), the certificate hashes to pin (e.g.
// [SelfSigned.Hashes]; nil for a server with a CA-signed certificate). The response is
// not cacheable, so a page always gets the hashes of the certificates in use.
func EndpointHandler(sessionURL func(host string) string, hashes func() []CertHash) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		e := endpoint{URL: sessionURL(r.Host)}
		if hashes != nil {
			e.Hashes = hashes()
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(e.AppendJSON(nil))
	})
}
