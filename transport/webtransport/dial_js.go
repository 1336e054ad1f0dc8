//go:build js && wasm

package webtransport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"syscall/js"

	"github.com/archenet/archenet/transport/internal/frame"
)

// Dial opens a WebTransport session to rawURL (https://host:port/path) with the
// browser's WebTransport API and returns the archenet connection over it, once the
// session is ready and the message stream is open (within cfg.HandshakeTimeout and
// ctx). With cfg.CertHashes the browser accepts the server certificate by hash
// (serverCertificateHashes); without, it must be CA-signed. The archenet handshake
// comes next: pass the Conn to replication.NewClient.
//
// The browser does not say why a session could not be opened; the error lists what it
// can be: no server at that address, a page origin the server refuses, or a
// certificate that is not one of the pinned hashes (a page loaded before the server
// rotated its certificate: fetch the endpoint again, see [DialEndpoint]).
func Dial(ctx context.Context, rawURL string, cfg *Config) (*Conn, error) {
	r, set, u, err := resolveDial(cfg, rawURL)
	if err != nil {
		return nil, err
	}
	ctor := js.Global().Get("WebTransport")
	if ctor.Type() != js.TypeFunction {
		return nil, errors.New("webtransport: this browser has no WebTransport (Chromium 97+, Firefox 114+, Safari 26.4+)")
	}
	ctx, cancel := context.WithTimeout(ctx, set.HandshakeTimeout)
	defer cancel()
	wtv, err := newWebTransport(ctor, rawURL, r.CertHashes)
	if err != nil {
		return nil, fmt.Errorf("webtransport: dial %s: %w", rawURL, err)
	}
	// A failed session also rejects closed; watch handles it once the Conn exists,
	// until then this keeps the rejection from being reported as unhandled.
	wtv.Get("closed").Call("catch", js.FuncOf(func(js.Value, []js.Value) any { return nil }))
	fail := func(phase string, err error) (*Conn, error) {
		_, _ = call(wtv, "close", map[string]any{"closeCode": int(1), "reason": phase + " failed"})
		return nil, fmt.Errorf("webtransport: dial %s: %s: %w", rawURL, phase, err)
	}
	if _, err := await(ctx, wtv.Get("ready")); err != nil {
		return fail("opening the session", &SessionRefusedError{URL: rawURL, Hashes: len(r.CertHashes), PageOrigin: crossOrigin(u), Err: err})
	}
	st, err := await(ctx, wtv.Call("createBidirectionalStream"))
	if err != nil {
		return fail("opening the message stream", err)
	}
	writer := st.Get("writable").Call("getWriter")
	if _, err := await(ctx, writer.Call("write", bytesToJS([]byte{frame.Preamble}))); err != nil {
		return fail("writing the stream preamble", err)
	}
	return newConn(wtv, writer, st.Get("readable").Call("getReader"), rawURL, &set), nil
}

func newWebTransport(ctor js.Value, rawURL string, hashes []CertHash) (v js.Value, err error) {
	defer func() {
		if p := recover(); p != nil {
			if je, ok := p.(js.Error); ok {
				err = jsError(je.Value)
				return
			}
			panic(p)
		}
	}()
	opts := map[string]any{"requireUnreliable": true}
	if len(hashes) > 0 {
		hs := make([]any, len(hashes))
		for i, h := range hashes {
			hs[i] = map[string]any{"algorithm": "sha-256", "value": bytesToJS(h[:])}
		}
		opts["serverCertificateHashes"] = hs
	}
	return ctor.New(rawURL, opts), nil
}

// crossOrigin returns the page's origin if the session URL u has another host or port
// (a server's default origin policy refuses such a page), else "".
func crossOrigin(u *url.URL) string {
	loc := js.Global().Get("location")
	if loc.Type() != js.TypeObject || str(loc.Get("host")) == u.Host {
		return ""
	}
	return str(loc.Get("origin"))
}

// SessionRefusedError is the error of a Dial whose session the browser could not open.
// The browser does not say why (a 403 for the page's origin, a certificate that is not
// pinned and no server at all look alike to the page); the message lists what it can
// be, most likely first.
type SessionRefusedError struct {
	URL    string
	Hashes int // how many certificate hashes were pinned
	// PageOrigin is the page's origin if the session URL has another host or port
	// (which the server's origin policy may refuse), else "".
	PageOrigin string
	Err        error
}

// Error says that the session could not be opened and lists what the cause can be.
func (e *SessionRefusedError) Error() string {
	var why []string
	if e.PageOrigin != "" {
		why = append(why, fmt.Sprintf("the server refused this page's origin %s (another origin than the session's: the server must list it in its webtransport.Config.AllowedOrigins)", e.PageOrigin))
	}
	if e.Hashes > 0 {
		why = append(why, fmt.Sprintf("its certificate is not one of the %d pinned hashes (a page loaded before the server rotated its certificate: reload the page)", e.Hashes))
	} else {
		why = append(why, "its certificate is not trusted by this browser")
	}
	why = append(why, "no server is listening at "+e.URL)
	return fmt.Sprintf("%v; the browser does not say why: %s", e.Err, strings.Join(why, ", or "))
}

// Unwrap returns the browser's error.
func (e *SessionRefusedError) Unwrap() error { return e.Err }

// fetchEndpoint fetches and parses the endpoint document at rawURL (relative to the
// page, e.g. "/archenet.json"), as [EndpointHandler] serves it.
func fetchEndpoint(ctx context.Context, rawURL string) (endpoint, error) {
	fetch := js.Global().Get("fetch")
	rsp, err := await(ctx, fetch.Invoke(rawURL, map[string]any{"cache": "no-store"}))
	if err != nil {
		return endpoint{}, fmt.Errorf("webtransport: fetching %s: %w", rawURL, err)
	}
	if !rsp.Get("ok").Bool() {
		return endpoint{}, fmt.Errorf("webtransport: fetching %s: HTTP %d", rawURL, rsp.Get("status").Int())
	}
	buf, err := await(ctx, rsp.Call("arrayBuffer"))
	if err != nil {
		return endpoint{}, fmt.Errorf("webtransport: reading %s: %w", rawURL, err)
	}
	n := buf.Get("byteLength").Int()
	if n > maxEndpointSize {
		return endpoint{}, fmt.Errorf("%w: %d bytes, more than %d", errMalformedEndpoint, n, maxEndpointSize)
	}
	b := make([]byte, n)
	js.CopyBytesToGo(b, js.Global().Get("Uint8Array").New(buf))
	return parseEndpoint(b)
}

// DialEndpoint fetches the endpoint document at endpointURL and dials the session it
// names, pinning its hashes. If that fails, it fetches the document once more and, if
// the hashes changed meanwhile (the server rotated its certificate), dials again.
func DialEndpoint(ctx context.Context, endpointURL string, cfg *Config) (*Conn, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	e, err := fetchEndpoint(ctx, endpointURL)
	if err != nil {
		return nil, err
	}
	c.CertHashes = e.Hashes
	conn, err := Dial(ctx, e.URL, &c)
	if err == nil {
		return conn, nil
	}
	e2, err2 := fetchEndpoint(ctx, endpointURL)
	if err2 != nil || e2.URL == e.URL && slices.Equal(e2.Hashes, e.Hashes) {
		return nil, err
	}
	c.CertHashes = e2.Hashes
	return Dial(ctx, e2.URL, &c)
}

// streamReader reads the message stream's chunks as an io.Reader.
type streamReader struct {
	r     js.Value // ReadableStreamDefaultReader
	ctx   context.Context
	buf   []byte
	store []byte
}

func (s *streamReader) Read(p []byte) (int, error) {
	if len(s.buf) == 0 {
		res, err := await(s.ctx, s.r.Call("read"))
		if err != nil {
			return 0, err
		}
		if res.Get("done").Bool() {
			return 0, io.EOF
		}
		v := res.Get("value")
		n := v.Get("length").Int()
		if cap(s.store) < n || cap(s.store) > 256<<10 && n < 64<<10 {
			s.store = make([]byte, n)
		}
		s.buf = s.store[:n]
		js.CopyBytesToGo(s.buf, v)
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}
