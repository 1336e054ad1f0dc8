//go:build js && wasm

// Command wasmprobe is the browser side of package webtransport's Chromium tests: a
// page runs it, it dials the test server with [webtransport.DialEndpoint] (or
// [webtransport.Dial] with the hashes in the page's query) and plays the script its
// "mode" query parameter names, then sets window.probeResult to a JSON report the test
// reads.
//
//	echo   messages (50 small, one of 1 MiB) from the server in order; 180 datagrams of
//	       1200 bytes each way at 60 Hz; the datagram size limits; the server's close
//	stale  Dial pinned to the hash in the "hash" parameter: the error the page shows
//	origin DialEndpoint from a page whose origin the server refuses: the error
//	flood  datagrams as fast as the writer takes them until the server closes the session
//	bye    the handshake, then a close with code application+7 and reason "page left"
package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/url"
	"syscall/js"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/webtransport"
)

func main() {
	q, _ := url.ParseQuery(js.Global().Get("location").Get("search").String()[1:])
	var res map[string]any
	switch q.Get("mode") {
	case "echo":
		res = echo()
	case "stale":
		res = stale(q.Get("url"), q.Get("hash"))
	case "flood":
		res = flood()
	case "origin":
		res = refused()
	case "bye":
		res = bye()
	default:
		res = map[string]any{"error": "unknown mode " + q.Get("mode")}
	}
	b, _ := json.Marshal(res)
	js.Global().Set("probeResult", string(b))
}

func fail(res map[string]any, format string, args ...any) map[string]any {
	res["error"] = fmt.Sprintf(format, args...)
	return res
}

func echo() map[string]any {
	res := map[string]any{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	c, err := webtransport.DialEndpoint(ctx, "/endpoint.json", nil)
	if err != nil {
		return fail(res, "dial: %v", err)
	}
	res["dialMs"] = time.Since(start).Milliseconds()
	if err := c.SendMessage([]byte("hello probe")); err != nil {
		return fail(res, "send hello: %v", err)
	}
	if w, err := c.ReceiveMessage(ctx); err != nil || transport.TypeOf(w) != transport.MessageWelcome {
		return fail(res, "welcome: %q %v", w, err)
	}
	for i := range 50 {
		m, err := c.ReceiveMessage(ctx)
		if err != nil {
			return fail(res, "message %d: %v", i, err)
		}
		if string(m) != fmt.Sprintf("m%d", i) {
			return fail(res, "message %d is %q", i, m)
		}
	}
	big, err := c.ReceiveMessage(ctx)
	if err != nil {
		return fail(res, "big message: %v", err)
	}
	for i, b := range big {
		if b != byte(i%251) {
			return fail(res, "big message: byte %d of %d is %d", i, len(big), b)
		}
	}
	res["bigBytes"] = len(big)

	// Datagrams from the server until its "dg-done" message.
	seen := map[uint32]bool{}
	for {
		if b, ok := c.PollDatagram(); ok {
			if len(b) != webtransport.MaxDatagramPayload {
				return fail(res, "datagram of %d bytes", len(b))
			}
			seen[binary.BigEndian.Uint32(b)] = true
			continue
		}
		if m, ok := c.PollMessage(); ok {
			if string(m) != "dg-done" {
				return fail(res, "message %q while receiving datagrams", m)
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	res["datagramsReceived"] = len(seen)

	// 180 datagrams to the server at 60 Hz, of the most this browser sends
	// (MaxDatagramPayload, or the browser's maxDatagramSize if smaller:
	// 1024 bytes in Chromium 148).
	tk := time.NewTicker(time.Second / 60)
	b := make([]byte, c.MaxDatagramSize())
	for i := range 180 {
		<-tk.C
		binary.BigEndian.PutUint32(b, uint32(i))
		if err := c.SendDatagram(b); err != nil {
			return fail(res, "send datagram %d: %v", i, err)
		}
	}
	tk.Stop()
	time.Sleep(200 * time.Millisecond)
	if err := c.SendMessage([]byte("dg-done")); err != nil {
		return fail(res, "send dg-done: %v", err)
	}
	res["maxDatagramSize"] = c.MaxDatagramSize()
	res["tooLarge"] = fmt.Sprint(c.SendDatagram(make([]byte, c.MaxDatagramSize()+1)))
	st := c.Stats()
	res["rttMs"] = float64(st.RTT) / float64(time.Millisecond)
	res["hasGetStats"] = js.Global().Get("WebTransport").Get("prototype").Get("getStats").Type() == js.TypeFunction
	<-c.Done()
	closed(res, c.Err())
	return res
}

func stale(rawURL, hash string) map[string]any {
	res := map[string]any{}
	h, err := base64.StdEncoding.DecodeString(hash)
	if err != nil || len(h) != 32 {
		return fail(res, "bad hash parameter %q", hash)
	}
	var ch webtransport.CertHash
	copy(ch[:], h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := webtransport.Dial(ctx, rawURL, &webtransport.Config{CertHashes: []webtransport.CertHash{ch}})
	if err == nil {
		c.Close()
		return fail(res, "dial with a stale hash succeeded")
	}
	res["dialError"] = err.Error()
	return res
}

func flood() map[string]any {
	res := map[string]any{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := webtransport.DialEndpoint(ctx, "/endpoint.json", nil)
	if err != nil {
		return fail(res, "dial: %v", err)
	}
	b := make([]byte, 1000)
	sent := 0
	for c.SendDatagram(b) == nil {
		sent++
		if sent%64 == 0 {
			time.Sleep(time.Millisecond) // let the writer goroutine run
		}
		if ctx.Err() != nil {
			break
		}
	}
	<-c.Done()
	res["sent"] = sent
	closed(res, c.Err())
	return res
}

// closed reports the close error err in res.
func closed(res map[string]any, err error) {
	res["closed"] = err.Error()
	if ce, ok := err.(*transport.CloseError); ok {
		res["closeCode"], res["closeReason"], res["closeRemote"] = int(ce.Code), ce.Reason, ce.Remote
	}
}

func refused() map[string]any {
	res := map[string]any{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := webtransport.DialEndpoint(ctx, "/endpoint.json", nil)
	if err == nil {
		c.Close()
		return fail(res, "dial from a refused origin succeeded")
	}
	res["dialError"] = err.Error()
	return res
}

func bye() map[string]any {
	res := map[string]any{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := webtransport.DialEndpoint(ctx, "/endpoint.json", nil)
	if err != nil {
		return fail(res, "dial: %v", err)
	}
	if err := c.SendMessage([]byte("hello")); err != nil {
		return fail(res, "hello: %v", err)
	}
	if _, err := c.ReceiveMessage(ctx); err != nil {
		return fail(res, "welcome: %v", err)
	}
	_ = c.CloseWithReason(transport.CodeApplication+7, "page left")
	closed(res, c.Err())
	return res
}
