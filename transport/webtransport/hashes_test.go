//go:build !js

package webtransport

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func testEndpoint() endpoint {
	var a, b CertHash
	for i := range a {
		a[i], b[i] = byte(i), byte(255-i)
	}
	return endpoint{URL: "https://127.0.0.1:8080/archenet", Hashes: []CertHash{a, b}}
}

func TestEndpointRoundTrip(t *testing.T) {
	e := testEndpoint()
	b := e.AppendJSON(nil)
	require.Equal(t, `{"url":"https://127.0.0.1:8080/archenet","hashes":[{"algorithm":"sha-256","value":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="},{"algorithm":"sha-256","value":"//79/Pv6+fj39vX08/Lx8O/u7ezr6uno5+bl5OPi4eA="}]}`, string(b))
	got, err := parseEndpoint(b)
	require.NoError(t, err)
	require.Equal(t, e, got)
	// Every truncated prefix fails.
	for i := range b {
		_, err := parseEndpoint(b[:i])
		require.ErrorIs(t, err, errMalformedEndpoint, "prefix %d", i)
	}
}

func TestParseEndpointRejects(t *testing.T) {
	for _, doc := range []string{
		`{"url":"http://127.0.0.1/x","hashes":[]}`,
		`{"url":"https:///x","hashes":[]}`,
		`{"url":"https://h/x","hashes":[{"algorithm":"sha-1","value":"AAEC"}]}`,
		`{"url":"https://h/x","hashes":[{"algorithm":"sha-256","value":"AAEC"}]}`,
		`{"url":"https://h/x","hashes":[{"algorithm":"sha-256","value":"!!"}]}`,
		`{"url":"https://h/x","hashes":[` + strings.Repeat(`{"algorithm":"sha-256","value":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="},`, 8) + `{"algorithm":"sha-256","value":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}]}`,
		`{"url":"https://h/x","hashes":"` + strings.Repeat("a", maxEndpointSize) + `"}`,
	} {
		_, err := parseEndpoint([]byte(doc))
		require.True(t, errors.Is(err, errMalformedEndpoint), "%.80s: %v", doc, err)
	}
}

// FuzzParseEndpoint: parseEndpoint never panics, and what it accepts encodes back to
// a document it parses to the same endpoint.
func FuzzParseEndpoint(f *testing.F) {
	f.Add(testEndpoint().AppendJSON(nil))
	f.Add(endpoint{URL: "https://[::1]:443/a"}.AppendJSON(nil))
	f.Add([]byte(`{"url":"https://h/x","hashes":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := parseEndpoint(b)
		if err != nil {
			return
		}
		again, err := parseEndpoint(e.AppendJSON(nil))
		require.NoError(t, err)
		require.Equal(t, len(e.Hashes), len(again.Hashes))
		require.Equal(t, e.URL, again.URL)
	})
}
