//go:build !js

package webtransport

import "encoding/json"

// AppendJSON appends the endpoint's JSON document to b.
func (e endpoint) AppendJSON(b []byte) []byte {
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

// decodeEndpoint decodes the JSON of an endpoint document (parseEndpoint
// checks what it says). In a page it is the browser's JSON.parse instead
// (endpoint_json_js.go), so that pages link no encoding/json.
func decodeEndpoint(b []byte) (jsonEndpoint, error) {
	var j jsonEndpoint
	err := json.Unmarshal(b, &j)
	return j, err
}
