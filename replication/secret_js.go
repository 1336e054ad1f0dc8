//go:build js

package replication

import (
	"syscall/js"

	"github.com/archenet/archenet/replication/internal/wire"
)

// newSecret draws a seat's resume secret from the browser's
// crypto.getRandomValues (what crypto/rand reads there, without linking
// crypto/rand's packages into every page: a page is a client, and only a
// server draws secrets).
func newSecret() [wire.SecretLen]byte {
	var b [wire.SecretLen]byte
	a := js.Global().Get("Uint8Array").New(len(b))
	js.Global().Get("crypto").Call("getRandomValues", a)
	js.CopyBytesToGo(b[:], a)
	return b
}
