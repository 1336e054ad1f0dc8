// Package origin is the origin policy of the transports whose sessions a
// browser opens (transport/webtransport, transport/websocket).
package origin

import (
	"net/http"
	"net/url"
	"strings"
)

// Allowed reports whether a session request r may proceed: check decides
// if set; else a request without an Origin header (a native client), one
// whose origin has the request's host and port, or one of allowed ("*":
// every origin).
func Allowed(r *http.Request, allowed []string, check func(*http.Request) bool) bool {
	if check != nil {
		return check(r)
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	if u, err := url.Parse(o); err == nil && strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, a := range allowed {
		if a == "*" || strings.EqualFold(strings.TrimSuffix(a, "/"), o) {
			return true
		}
	}
	return false
}
