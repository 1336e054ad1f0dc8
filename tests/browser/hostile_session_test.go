package browser_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/tests/internal/harness"
	"github.com/archenet/archenet/tests/internal/loopback"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/webtransport"
	"github.com/archenet/archenet/transport/webtransport/webtransporttest"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// hostilePage opens WebTransport sessions that speak archenet's stream preamble and
// a valid Hello, take the Welcome, and then break a rule: hostile(kind) resolves to
// how the session ended ({closeCode, reason} or {error}) and records it in
// window.hostileSeen[kind].
const hostilePage = `<!doctype html><meta charset="utf-8"><title>hostile</title><script>
const P = new URLSearchParams(location.search);
const b64 = s => Uint8Array.from(atob(s), c => c.charCodeAt(0));
const varint = n => { const b = []; while (n >= 0x80) { b.push(n % 0x80 | 0x80); n = Math.floor(n / 0x80); } b.push(n); return b; };
const cat = (...parts) => Uint8Array.from(parts.flatMap(p => Array.from(p)));
window.hostileSeen = {};
async function hostile(kind) {
  const out = {kind, stage: "start"};
  const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("no close within 20 s at " + out.stage)), 20000));
  try { await Promise.race([session(kind, out), timeout]); } catch (e) { out.error = String(e); }
  window.hostileSeen[kind] = out;
  return out;
}
async function session(kind, out) {
  const ep = await (await fetch("/endpoint.json", {cache: "no-store"})).json();
  const t = new WebTransport(ep.url, {serverCertificateHashes: ep.hashes.map(h => ({algorithm: h.algorithm, value: b64(h.value)}))});
  out.stage = "ready"; await t.ready;
  out.stage = "stream"; const s = await t.createBidirectionalStream();
  const w = s.writable.getWriter();
  const hello = b64(P.get("hello"));
  await w.write(cat([0xA1], varint(hello.length), hello));
  out.stage = "welcome"; await s.readable.getReader().read(); // the Welcome
  out.stage = kind;
  const dw = (t.datagrams.createWritable ? t.datagrams.createWritable() : t.datagrams.writable).getWriter();
  try { await misbehave(kind, w, dw); } catch (e) { out.writeError = String(e); } // (the session may close under it)
  out.stage = "closed"; const info = await t.closed;
  out.closeCode = info.closeCode; out.reason = info.reason;
}
async function misbehave(kind, w, dw) {
  switch (kind) {
  case "bigDatagram": await dw.write(new Uint8Array(1210)); break; // browsers send up to 1215
  case "junkDatagram":
    // (Its first byte is no datagram kind, with or without flags: random
    // junk that starts with the client datagram's kind is judged by the ack
    // it seems to carry, for another reason, such as an ack from the future.)
    for (let i = 0; i < 20; i++) { const b = crypto.getRandomValues(new Uint8Array(100)); b[0] = 0x70 | (b[0] & 0x0f); await dw.ready; await dw.write(b); }
    break;
  case "junkFrame": await w.write(cat(varint(5), [1, 2, 3, 4, 5])); break; // a well-framed message after the handshake
  case "bigFrame": await w.write(cat(varint(2 << 20), new Uint8Array(1000))); break;
  case "badPrefix": await w.write(new Uint8Array(16).fill(0xff)); break;
  }
}
</script>`

// hostileKinds are the rules a hostile page breaks, each with the close code the
// server gives it and the reason it must name.
var hostileKinds = []struct {
	kind, reason string
	code         transport.CloseCode
}{
	{"bigDatagram", "datagram of 1210 bytes exceeds the maximum of 1200", transport.CodeProtocolError},
	{"junkDatagram", "malformed", transport.CodeProtocolError},
	{"junkFrame", "unexpected reliable message of 5 bytes", transport.CodeProtocolError},
	{"bigFrame", "message of 2097152 bytes exceeds the maximum of 1048576 bytes", transport.CodeMessageTooLarge},
	{"badPrefix", "malformed length prefix", transport.CodeProtocolError},
}

// A page in headless Chromium opens session after session that sends oversized
// (1210 B) or garbage datagrams, garbage or oversized stream frames, or a garbage
// length prefix, against a match of 200 moving, churning entities and two native
// (QUIC) players: each session is dropped with a close code and a reason the page
// receives, and the native players notice nothing: the server's ticks during the
// hostile sessions against those of its control, a second server replicating the
// same world to two native players in the same loop (loopback.Rig.RequireTicks: the
// page, Chromium and the machine's other load slow both alike), and the players' lag
// within the bound of the other isolation tests (or twice the control's players').
// The worst tick over as long without the hostile sessions (the page loaded and
// idle) is reported beside them.
func TestBrowserHostileSession(t *testing.T) {
	// Chromium starts before the match: the clients time out if the loop
	// stops for as long as a busy machine takes to start it.
	browser := webtransporttest.Chromium(t)
	w := loopback.NewMixed(t, webtransport.Config{}, true, nil)
	ents := w.Movers(200, 8)
	for range 2 {
		w.Good = append(w.Good, w.Rig.Dial(w.Rig.QUIC.Addr().String(), ""))
	}
	w.Until("native players ready", 10*time.Second, func() bool { return w.Clients[0].Client.Ready() && w.Clients[1].Client.Ready() })
	hello := transport.Hello{Version: replication.ProtocolVersion, ProtocolHash: w.Registry.Hash()}.Append(nil)
	mux := http.NewServeMux()
	mux.Handle("/endpoint.json", webtransport.EndpointHandler(w.WT.URL, w.Certs.Hashes))
	mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, hostilePage) })
	page := webtransporttest.PageServer(t, w.WT.Addr().(*net.UDPAddr).Port, mux)
	ctx, cancel := context.WithTimeout(browser, 2*time.Minute)
	defer cancel()
	// (The match runs while the page loads.)
	navigated := make(chan error, 1)
	go func() {
		navigated <- chromedp.Do(ctx, chromedp.Navigate(page.URL+"/?hello="+base64.URLEncoding.EncodeToString(hello)))
	}()
	var navErr error
	loaded := false
	w.Until("the page loaded", time.Minute, func() bool {
		select {
		case navErr = <-navigated:
			loaded = true
		default:
		}
		return loaded
	})
	require.NoError(t, navErr)

	rng := rand.New(rand.NewPCG(8, 8))
	w.Game = harness.SpawnChurn(w.Harness, ents, 20, rng)
	w.RunFor(time.Second, nil) // (warm-up: the churn's first spawns, the page settling)
	// Without hostile sessions (the page loaded, idle).
	w.ResetLag()
	from := len(w.Ticks)
	w.RunFor(4*time.Second, nil)
	calm := w.WorstTick(from, "without hostile sessions")
	calmLag := [2]int{w.LagMax[0], w.LagMax[1]}
	w.ResetLag()

	// With them: every kind in turn, one session after another, for as long (and
	// at least three rounds), while the match runs (the page is driven from a
	// goroutine of its own).
	const rounds = 3
	var mu sync.Mutex
	var results []map[string]any
	stop := make(chan struct{})
	driven := make(chan struct{})
	go func() {
		defer close(driven)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := hostileKinds[i%len(hostileKinds)]
			r, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](fmt.Sprintf(`hostile(%q)`, k.kind), chromedp.EvalAwaitPromise))
			if err != nil {
				r = map[string]any{"kind": k.kind, "error": "evaluating: " + err.Error()}
			}
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		}
	}()
	from = len(w.Ticks)
	began := time.Now()
	stopped := false
	w.RunFor(90*time.Second, func() bool {
		mu.Lock()
		enough := len(results) >= rounds*len(hostileKinds) && time.Since(began) >= 4*time.Second
		mu.Unlock()
		if enough && !stopped {
			close(stop) // (the server keeps running until the session under way ends)
			stopped = true
		}
		select {
		case <-driven:
			return true
		default:
			return false
		}
	})
	require.True(t, stopped, "hostile sessions ended: %d in %v", len(results), time.Since(began))
	<-driven
	stormy := w.RequireTicks(from, "with hostile sessions")
	require.GreaterOrEqual(t, len(results), rounds*len(hostileKinds), "hostile sessions ended")
	for _, r := range results {
		var k = hostileKinds[0]
		for _, hk := range hostileKinds {
			if hk.kind == r["kind"] {
				k = hk
			}
		}
		require.Nil(t, r["error"], "%s: the page got no close code: %v", r["kind"], r)
		require.EqualValues(t, k.code, r["closeCode"], "%v", r)
		require.Contains(t, r["reason"], k.reason, "%v", r)
	}
	t.Logf("%d hostile sessions in %v, each dropped with its code and reason", len(results), time.Since(began).Round(time.Millisecond))
	for _, k := range hostileKinds {
		r, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](fmt.Sprintf(`window.hostileSeen[%q]`, k.kind)))
		require.NoError(t, err)
		t.Logf("%s: the page saw code %v: %q", k.kind, r["closeCode"], r["reason"])
	}
	t.Logf("worst server tick %v without and %v with hostile sessions; native players' worst lag %v and %v ticks without, %d and %d with",
		calm.Round(10*time.Microsecond), stormy.Round(10*time.Microsecond), calmLag[0], calmLag[1], w.LagMax[0], w.LagMax[1])
	w.RequireKeptUp()
	dropped := len(w.Events())
	require.GreaterOrEqual(t, dropped, len(results), "every hostile session was dropped")
	require.Len(t, w.Server.Clients(), 2, "the native players are still in")
	w.Game = nil
	w.Until("convergence", 10*time.Second, func() bool { return w.Converged(0, nil) == nil && w.Converged(1, nil) == nil })
}
