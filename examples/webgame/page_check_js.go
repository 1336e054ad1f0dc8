//go:build js && archenet_check

package main

import (
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/replicationtest"
)

// Built with -tags archenet_check (the test's live check), the page exposes
// its mirrors as window.webgameCapture().
func init() {
	onClient = func(c *replication.Client) { replicationtest.ExposeCapture("webgameCapture", c) }
}
