package webtransport

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
)

// CertHash is the SHA-256 hash of a DER-encoded certificate: what a browser's
// serverCertificateHashes option (and [Config].CertHashes) pins instead of a CA.
type CertHash [sha256.Size]byte

// HashCertificate returns the CertHash of a DER-encoded certificate.
func HashCertificate(der []byte) CertHash { return sha256.Sum256(der) }

// String is the hash in standard base64 (the "value" of its JSON form).
func (h CertHash) String() string { return base64.StdEncoding.EncodeToString(h[:]) }

// Endpoint is what a page needs to open a session: the session URL and the hashes of
// the certificates the server presents now and will present after its next rotation
// (none when the server has a CA-signed certificate). Servers publish it as JSON
// ([EndpointHandler]):
//
//	{"url":"https://127.0.0.1:8080/archenet","hashes":[{"algorithm":"sha-256","value":"<base64>"}]}
//
// the "hashes" entries in the form the browser's serverCertificateHashes takes.
type Endpoint struct {
	URL    string
	Hashes []CertHash
}

// Bounds of [ParseEndpoint].
const (
	MaxEndpointSize   = 16 << 10 // bytes of JSON
	MaxEndpointHashes = 8
)

type jsonHash struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"value"`
}

type jsonEndpoint struct {
	URL    string     `json:"url"`
	Hashes []jsonHash `json:"hashes"`
}

// AppendJSON appends the endpoint's JSON document to b.
func (e Endpoint) AppendJSON(b []byte) []byte {
	j := jsonEndpoint{URL: e.URL, Hashes: make([]jsonHash, len(e.Hashes))}
	for i, h := range e.Hashes {
		j.Hashes[i] = jsonHash{Algorithm: "sha-256", Value: h.String()}
	}
	out, err := json.Marshal(j)
	if err != nil { // strings and slices of strings always marshal
		panic(err)
	}
	return append(b, out...)
}

// ErrMalformedEndpoint is matched (errors.Is) by every error of [ParseEndpoint].
var ErrMalformedEndpoint = errors.New("webtransport: malformed endpoint document")

// ParseEndpoint decodes an endpoint document. The URL must be an https URL; every hash
// must be "sha-256" with a base64 value of 32 bytes; at most [MaxEndpointHashes] hashes
// and [MaxEndpointSize] bytes. It never panics; errors match [ErrMalformedEndpoint].
func ParseEndpoint(b []byte) (Endpoint, error) {
	bad := func(format string, args ...any) (Endpoint, error) {
		return Endpoint{}, fmt.Errorf("%w: %s", ErrMalformedEndpoint, fmt.Sprintf(format, args...))
	}
	if len(b) > MaxEndpointSize {
		return bad("%d bytes, more than %d", len(b), MaxEndpointSize)
	}
	var j jsonEndpoint
	if err := json.Unmarshal(b, &j); err != nil {
		return bad("%v", err)
	}
	u, err := url.Parse(j.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return bad("url %q is not an https URL", j.URL)
	}
	if len(j.Hashes) > MaxEndpointHashes {
		return bad("%d hashes, more than %d", len(j.Hashes), MaxEndpointHashes)
	}
	e := Endpoint{URL: j.URL, Hashes: make([]CertHash, len(j.Hashes))}
	for i, h := range j.Hashes {
		if h.Algorithm != "sha-256" {
			return bad("hash %d: algorithm %q, want sha-256", i, h.Algorithm)
		}
		v, err := base64.StdEncoding.DecodeString(h.Value)
		if err != nil || len(v) != sha256.Size {
			return bad("hash %d: value %q is not 32 bytes of base64", i, h.Value)
		}
		copy(e.Hashes[i][:], v)
	}
	return e, nil
}
