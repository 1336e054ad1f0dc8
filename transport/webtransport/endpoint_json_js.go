//go:build js

package webtransport

import (
	"errors"
	"fmt"
	"syscall/js"
)

// decodeEndpoint decodes the JSON of an endpoint document with the browser's
// JSON.parse (encoding/json would add about 60 KB to a gzipped page), to
// what encoding/json gives natively: a missing or null "url" is "", missing
// or null "hashes" none; a value of another type is an error, as is a
// document that is not an object. The number of hashes is bounded before
// they are read (parseEndpoint checks the rest).
func decodeEndpoint(b []byte) (j jsonEndpoint, err error) {
	defer func() {
		if r := recover(); r != nil { // JSON.parse threw (a js.Error)
			j, err = jsonEndpoint{}, fmt.Errorf("%v", r)
		}
	}()
	v := js.Global().Get("JSON").Call("parse", string(b))
	if v.Type() != js.TypeObject || js.Global().Get("Array").Call("isArray", v).Bool() {
		return j, errors.New("not a JSON object")
	}
	if j.URL, err = jsString(v.Get("url"), "url"); err != nil {
		return j, err
	}
	h := v.Get("hashes")
	if h.IsNull() || h.IsUndefined() {
		return j, nil
	}
	if !js.Global().Get("Array").Call("isArray", h).Bool() {
		return j, errors.New(`"hashes" is not an array`)
	}
	n := h.Length()
	if n > maxEndpointHashes {
		return j, fmt.Errorf("%d hashes, more than %d", n, maxEndpointHashes)
	}
	j.Hashes = make([]jsonHash, n)
	for i := range n {
		e := h.Index(i)
		if e.IsNull() {
			continue
		}
		if e.Type() != js.TypeObject {
			return j, fmt.Errorf("hash %d is not an object", i)
		}
		if j.Hashes[i].Algorithm, err = jsString(e.Get("algorithm"), "algorithm"); err != nil {
			return j, err
		}
		if j.Hashes[i].Value, err = jsString(e.Get("value"), "value"); err != nil {
			return j, err
		}
	}
	return j, nil
}

// jsString is v as a string: "" for null or undefined, an error naming the
// key for another type.
func jsString(v js.Value, key string) (string, error) {
	switch v.Type() {
	case js.TypeString:
		return v.String(), nil
	case js.TypeNull, js.TypeUndefined:
		return "", nil
	}
	return "", fmt.Errorf("%q is not a string", key)
}
