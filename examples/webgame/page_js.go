//go:build js

package main

import (
	"context"
	"fmt"
	"syscall/js"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport/browser"
)

func main() {
	status := func(s string, args ...any) { js.Global().Set("webgame", fmt.Sprintf(s, args...)) }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	conn, via, err := browser.Dial(ctx, nil) // WebTransport, or the WebSocket fallback
	cancel()
	if err != nil {
		status("error: %v", err)
		return
	}
	w := arche.NewWorld()
	client, err := replication.NewClient(&w, conn, replication.ClientConfig{Registry: Registry()})
	if err != nil {
		status("error: %v", err)
		return
	}
	clicks, _ := replication.ClientMessages[Click](client)
	if onClient != nil {
		onClient(client)
	}
	canvas := js.Global().Get("document").Call("getElementById", "game")
	canvas.Set("width", W)
	canvas.Set("height", H)
	g := canvas.Call("getContext", "2d")
	canvas.Call("addEventListener", "click", js.FuncOf(func(_ js.Value, a []js.Value) any {
		_ = clicks.Send(Click{X: a[0].Get("offsetX").Float(), Y: a[0].Get("offsetY").Float()}, replication.Reliable)
		return nil
	}))
	for range time.Tick(time.Second / 60) {
		client.Receive()
		g.Set("fillStyle", "#111")
		g.Call("fillRect", 0, 0, W, H)
		g.Set("fillStyle", "#4c4")
		for q := w.Query(arche.All(arche.ComponentID[Dot](&w))); q.Next(); {
			d := (*Dot)(q.Get(arche.ComponentID[Dot](&w)))
			g.Call("fillRect", d.X-4, d.Y-4, 8, 8)
		}
		client.Send()
		status("playing over %s: %d dots", via, client.Mirrors())
	}
}

// onClient, if set, gets the client once it is made (page_check_js.go).
var onClient func(*replication.Client)
