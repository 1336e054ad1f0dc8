//go:build js

package replicationtest

import (
	"encoding/hex"
	"syscall/js"

	"github.com/archenet/archenet/replication"
)

// ExposeCapture makes window[name] a function of the page that returns the
// client's mirrors ([CaptureClient]) as a hex string of [ClientCapture.AppendBinary],
// for a test or program beside the server to decode (hex, then
// [ClientCapture.UnmarshalBinary]) and check against its [History] while
// everything moves. It keeps the function for the page's life.
func ExposeCapture(name string, c *replication.Client) {
	js.Global().Set(name, js.FuncOf(func(js.Value, []js.Value) any {
		capt := CaptureClient(c.Registry(), c.World(), uint8(c.ID()), c.StateTick)
		b, _ := capt.AppendBinary(nil)
		return hex.EncodeToString(b)
	}))
}
