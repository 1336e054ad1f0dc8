// Package origin is the origin policy of the transports whose sessions a
// browser opens (transport/webtransport, transport/websocket).
package origin

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
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

// Check is the first judgement of a browser transport's session request:
// 503 once its listener has closed (closed), 403 for an origin the policy
// (Allowed) refuses, with why; status 0: the request may go on.
func Check(r *http.Request, closed <-chan struct{}, allowed []string, check func(*http.Request) bool) (status int, why string) {
	select {
	case <-closed:
		return http.StatusServiceUnavailable, "listener closed"
	default:
	}
	if !Allowed(r, allowed, check) {
		return http.StatusForbidden, fmt.Sprintf("origin %q not allowed", r.Header.Get("Origin"))
	}
	return 0, ""
}

// SessionURL is the URL of a session at path on port, for a page loaded from
// host (an HTTP Host, "name" or "name:port"; empty: ip): scheme://name:port/path.
func SessionURL(scheme, host string, ip net.IP, port int, path string) string {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	if name == "" {
		name = ip.String()
	}
	return (&url.URL{Scheme: scheme, Host: net.JoinHostPort(strings.Trim(name, "[]"), strconv.Itoa(port)), Path: path}).String()
}
