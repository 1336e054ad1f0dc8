//go:build js

package replication

import (
	"encoding/base64"
	"syscall/js"
)

// The page's keeping of its seat's ticket (ClientConfig.KeepTicket):
// sessionStorage, which survives a reload of the page and ends with its
// tab.

func loadTicket(key string) []byte {
	s := js.Global().Get("sessionStorage")
	if !s.Truthy() {
		return nil
	}
	v := s.Call("getItem", key)
	if !v.Truthy() {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(v.String())
	if err != nil || len(b) == 0 {
		return nil
	}
	return b
}

func storeTicket(key string, t []byte) {
	if s := js.Global().Get("sessionStorage"); s.Truthy() {
		s.Call("setItem", key, base64.StdEncoding.EncodeToString(t))
	}
}

func forgetTicket(key string) {
	if s := js.Global().Get("sessionStorage"); s.Truthy() {
		s.Call("removeItem", key)
	}
}
