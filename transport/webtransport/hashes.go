package webtransport

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
)

// CertHash is the SHA-256 hash of a DER-encoded certificate: what a browser's
// serverCertificateHashes option (and [Config].CertHashes) pins instead of a CA.
type CertHash [32]byte

// String is the hash in standard base64 (the "value" of its JSON form).
func (h CertHash) String() string { return base64.StdEncoding.EncodeToString(h[:]) }

// endpoint is what a page needs to open a session: the session URL and the hashes of
// the certificates the server presents now and will present after its next rotation
// (none when the server has a CA-signed certificate). Servers publish it as JSON
// ([EndpointHandler]):
//
//	{"url":"https://127.0.0.1:8080/archenet","hashes":[{"algorithm":"sha-256","value":"<base64>"}]}
//
// the "hashes" entries in the form the browser's serverCertificateHashes takes.
type endpoint struct {
	URL    string
	Hashes []CertHash
}

// Bounds of [parseEndpoint].
const (
	maxEndpointSize   = 16 << 10 // bytes of JSON
	maxEndpointHashes = 8
)

// jsonEndpoint is the endpoint document as decoded, before [checkEndpoint].
type jsonEndpoint struct {
	URL    string     `json:"url"`
	Hashes []jsonHash `json:"hashes"`
}

type jsonHash struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"value"`
}

// errMalformedEndpoint is matched (errors.Is) by every error of [parseEndpoint].
var errMalformedEndpoint = errors.New("webtransport: malformed endpoint document")

// parseEndpoint decodes an endpoint document. The URL must be an https URL; every hash
// must be "sha-256" with a base64 value of 32 bytes; at most [maxEndpointHashes] hashes
// and [maxEndpointSize] bytes. It never panics; errors match [errMalformedEndpoint].
func parseEndpoint(b []byte) (endpoint, error) {
	bad := func(format string, args ...any) (endpoint, error) {
		return endpoint{}, fmt.Errorf("%w: %s", errMalformedEndpoint, fmt.Sprintf(format, args...))
	}
	if len(b) > maxEndpointSize {
		return bad("%d bytes, more than %d", len(b), maxEndpointSize)
	}
	j, err := decodeEndpoint(b)
	if err != nil {
		return bad("%v", err)
	}
	u, err := url.Parse(j.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return bad("url %q is not an https URL", j.URL)
	}
	if len(j.Hashes) > maxEndpointHashes {
		return bad("%d hashes, more than %d", len(j.Hashes), maxEndpointHashes)
	}
	e := endpoint{URL: j.URL, Hashes: make([]CertHash, len(j.Hashes))}
	for i, h := range j.Hashes {
		if h.Algorithm != "sha-256" {
			return bad("hash %d: algorithm %q, want sha-256", i, h.Algorithm)
		}
		v, err := base64.StdEncoding.DecodeString(h.Value)
		if err != nil || len(v) != len(CertHash{}) {
			return bad("hash %d: value %q is not 32 bytes of base64", i, h.Value)
		}
		copy(e.Hashes[i][:], v)
	}
	return e, nil
}
