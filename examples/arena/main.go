// Command arena is a small real game on archenet: an authoritative server
// with wandering NPCs firing short-lived projectiles (constant spawns and
// despawns), one avatar per client driven by input and predicted on its
// client, and everything else interpolated.
//
//	go run ./examples/arena                          server + 3 bot clients over QUIC on 127.0.0.1
//	go run ./examples/arena -duration 10s            the same, stopping after 10 s
//	go run ./examples/arena -mode server -addr 127.0.0.1:4433
//	go run ./examples/arena -mode client -addr 127.0.0.1:4433 -clients 8
//	go run ./examples/arena -http 127.0.0.1:8080       live network debugger page at http://127.0.0.1:8080/
//	go run ./examples/arena -web 127.0.0.1:8080        + browser players: open http://127.0.0.1:8080/ in Chromium
//	go run ./examples/arena -agones                    a game server under the Agones sidecar (see below)
//	go run ./examples/arena -mode client -match duel   bots joining match "duel" of a host
//
// With -agones the server is a host of matches (package replication/host)
// driven by the Agones sidecar at $AGONES_SDK_HTTP_PORT (or -agones-url):
// Ready at start, Health while every match ticks, an arena match opened
// when the GameServer is allocated (named by its label or annotation
// "match", else -match), players tracked, and on SIGTERM or -duration a
// drain of up to -drain, then Shutdown. -http serves /healthz, /readyz and
// /stats there.
//
// It prints a status line every second and a summary on exit (Ctrl-C,
// SIGTERM or -duration); it exits non-zero on a fatal error, such as a
// client that fails to connect within -connect-timeout.
//
// In -mode server the server writes a development certificate (cert.pem,
// key.pem) to the -cert directory, or reuses the one there; -mode client
// trusts exactly that certificate. -mode both keeps a fresh one in memory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/archenet/archenet/examples/arena/game"
	"github.com/archenet/archenet/replication/debugview"
	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/quic"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	mode, addr, cert  string
	http, web, wasm   string
	clients, npcs     int
	duration, timeout time.Duration
	interest          float64
	seed              uint64
	insecure, verbose bool
	addrSet           bool
	agones            bool
	agonesURL, match  string
	drain             time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("arena", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.mode, "mode", "both", "server, client, or both (server and bots in one process)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:4433", "server UDP address (-mode both: a free port unless set)")
	fs.IntVar(&o.clients, "clients", 3, "number of bot clients (-mode both|client)")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long, counted once the server is up and the bots are connected (0: until Ctrl-C)")
	fs.IntVar(&o.npcs, "npcs", 24, "number of NPC bots on the server")
	fs.Float64Var(&o.interest, "interest", 0, "interest radius in metres (0: every client gets every entity)")
	fs.StringVar(&o.cert, "cert", filepath.Join(os.TempDir(), "archenet-arena"), "directory of the development certificate (cert.pem, key.pem) shared by -mode server and -mode client")
	fs.BoolVar(&o.insecure, "insecure", false, "client: accept ANY server certificate (dangerous; prefer -cert)")
	fs.DurationVar(&o.timeout, "connect-timeout", 5*time.Second, "a client that is not connected and ready in this time is a fatal error")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed of the NPCs and bots")
	fs.BoolVar(&o.verbose, "v", false, "log connection events")
	fs.StringVar(&o.http, "http", "", "serve the live network debugger page (no authentication) on this TCP address, e.g. 127.0.0.1:8080; a port alone (:8080) binds 127.0.0.1 (-mode server|both)")
	fs.StringVar(&o.web, "web", "", "serve browser players on this address, e.g. 127.0.0.1:8080: the page on TCP, WebTransport on UDP, same port (-mode server|both)")
	fs.StringVar(&o.wasm, "wasm", "", "-web: the browser build of examples/arenaview (empty: build it with the go command)")
	fs.BoolVar(&o.agones, "agones", false, "run as a game server under the Agones sidecar: a host of matches, opened on allocation (implies -mode server)")
	fs.StringVar(&o.agonesURL, "agones-url", "", "the sidecar's REST address (default: http://127.0.0.1:$AGONES_SDK_HTTP_PORT, else port 9358)")
	fs.StringVar(&o.match, "match", "", "client: the match to join on a host; -agones: the match an allocation opens when it names none (default arena)")
	fs.DurationVar(&o.drain, "drain", 30*time.Second, "-agones: how long a drain lets matches finish before ending them")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	modeSet := false
	fs.Visit(func(f *flag.Flag) {
		o.addrSet = o.addrSet || f.Name == "addr"
		modeSet = modeSet || f.Name == "mode"
	})
	if o.agones {
		if o.web != "" {
			return o, errors.New("-web cannot go with -agones (a host of matches serves QUIC players here)")
		}
		if modeSet && o.mode != "server" {
			return o, fmt.Errorf("-agones runs a server: -mode %s cannot go with it", o.mode)
		}
		o.mode = "server"
		if o.match == "" {
			o.match = "arena"
		}
	}
	switch o.mode {
	case "server", "client", "both":
	default:
		return o, fmt.Errorf("-mode %q: want server, client or both", o.mode)
	}
	if o.clients < 0 || o.clients > 250 {
		return o, fmt.Errorf("-clients %d: want 0..250", o.clients)
	}
	if o.npcs < 0 {
		return o, fmt.Errorf("-npcs %d is negative", o.npcs)
	}
	if o.web != "" && o.mode == "client" {
		return o, errors.New("-web serves browser players: use -mode server or both")
	}
	if o.http != "" && o.mode == "client" {
		return o, errors.New("-http serves the server's debugger: use -mode server or both")
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "arena:", err)
		return 2
	}
	// quic-go warns when the OS caps the UDP receive buffer below what it
	// wants; on loopback that does not matter.
	_ = os.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if o.agones {
		ctx, cancel := withDuration(ctx, o.duration)
		defer cancel()
		if err := runAgones(ctx, o, stdout, logger); err != nil {
			fmt.Fprintln(stderr, "arena:", err)
			return 1
		}
		return 0
	}
	a, cleanup, err := setup(ctx, o, stdout, logger)
	if err != nil {
		fmt.Fprintln(stderr, "arena:", err)
		return 1
	}
	// -duration counts from here: building the browser client or dialling
	// the bots on a busy machine can take seconds.
	ctx, cancel := withDuration(ctx, o.duration)
	defer cancel()
	err = loop(ctx, a, stdout)
	sum := a.Summary(time.Now()) // before cleanup: closing disconnects the clients
	cleanup()
	fmt.Fprint(stdout, sum)
	if err != nil {
		fmt.Fprintln(stderr, "arena:", err)
		return 1
	}
	return 0
}

// withDuration ends ctx after d (0: never).
func withDuration(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// setup starts the server and/or connects the bots over QUIC.
func setup(ctx context.Context, o options, stdout io.Writer, logger *slog.Logger) (*Arena, func(), error) {
	a := &Arena{ReadyTimeout: o.timeout}
	var ln *quic.Listener
	var web *http.Server
	var browsers *webServer
	cleanup := func() {
		if web != nil {
			_ = web.Close()
		}
		if browsers != nil {
			browsers.close()
		}
		for _, b := range a.Bots {
			b.Close()
		}
		if a.Server != nil {
			a.Server.Close() // closes the listener and waits for its goroutines
		} else if ln != nil {
			_ = ln.Close()
		}
	}
	var cert *quic.DevCert
	var err error
	switch o.mode {
	case "both":
		if cert, err = quic.GenerateDevCert(24 * time.Hour); err != nil {
			return nil, nil, err
		}
		if !o.addrSet {
			o.addr = "127.0.0.1:0"
		}
	case "server":
		if cert, err = serverCert(o.cert); err != nil {
			return nil, nil, err
		}
	case "client":
		if !o.insecure {
			if cert, err = quic.LoadDevCert(filepath.Join(o.cert, "cert.pem"), filepath.Join(o.cert, "key.pem")); err != nil {
				return nil, nil, fmt.Errorf("loading the server's development certificate (start -mode server first, with the same -cert): %w", err)
			}
		}
	}

	if o.mode != "client" {
		lc := &quic.Config{TLS: cert.ServerTLS()}
		so := game.ServerOptions{NPCs: o.npcs, Interest: o.interest, Seed: o.seed, Logger: logger}
		if o.mode != "server" {
			// The bots connect from this machine, all at once: no bounds per
			// address (they guard a public server).
			lc.MaxPendingPerAddress, so.MaxClientsPerAddress = -1, -1
		}
		if ln, err = quic.Listen(o.addr, lc); err != nil {
			return nil, nil, err
		}
		var players transport.Listener = ln
		if o.web != "" {
			if browsers, err = startWeb(o.web, o.wasm, stdout); err != nil {
				_ = ln.Close()
				return nil, nil, err
			}
			// Native and browser players join the same match through one listener.
			players = transport.MergeListeners(ln, browsers.l, browsers.ws)
		}
		so.Listener = players
		srv, err := game.NewServerGame(so)
		if err != nil {
			_ = players.Close()
			return nil, nil, err
		}
		a.Server = srv
		o.addr = ln.Addr().String()
		fmt.Fprintf(stdout, "arena server on %s (QUIC), %d NPCs, %d Hz simulation, %d Hz snapshots\n", o.addr, o.npcs, game.SimRate, game.NetRate)
		if o.http != "" {
			if web, err = serveDebugger(a, o.http, stdout); err != nil {
				cleanup()
				return nil, nil, err
			}
		}
		if o.mode == "server" {
			fmt.Fprintf(stdout, "development certificate in %s; connect with: go run ./examples/arena -mode client -addr %s -cert %s\n", o.cert, o.addr, o.cert)
		}
	}
	if o.mode != "server" {
		qc := &quic.Config{}
		if o.insecure {
			// DANGER: InsecureSkipVerify accepts any certificate, so anyone on the
			// path can impersonate the server. Only for a throwaway local test;
			// -cert with the server's development certificate keeps TLS verified.
			fmt.Fprintln(stdout, "WARNING: -insecure: the server certificate is NOT verified")
			qc.InsecureSkipVerify = true
		} else {
			qc.TLS = cert.ClientTLS()
		}
		for i := 0; i < o.clients; i++ {
			dctx, cancel := context.WithTimeout(ctx, o.timeout)
			conn, err := quic.Dial(dctx, o.addr, qc)
			cancel()
			if err != nil {
				cleanup()
				return nil, nil, fmt.Errorf("bot %d: connecting to %s: %w", i+1, o.addr, err)
			}
			b, err := game.NewBot(game.BotOptions{Conn: conn, Match: o.match, Seed: o.seed*1000 + uint64(i), Logger: logger})
			if err != nil {
				_ = conn.Close()
				cleanup()
				return nil, nil, err
			}
			a.Bots = append(a.Bots, b)
		}
		fmt.Fprintf(stdout, "%d bot clients connected to %s\n", o.clients, o.addr)
	}
	return a, cleanup, nil
}

// attachDebugger adds a network debugger recorder to the arena's server;
// Arena.Frame samples it and reports the server's tick time to it.
func attachDebugger(a *Arena, opts debugview.Options) *debugview.Recorder {
	a.Debug = debugview.NewRecorder(a.Server.Replication(), opts)
	return a.Debug
}

// serveDebugger serves the debugger page of the arena's server on addr.
func serveDebugger(a *Arena, addr string, stdout io.Writer) (*http.Server, error) {
	rec := attachDebugger(a, debugview.Options{})
	l, err := net.Listen("tcp", debuggerAddr(addr))
	if err != nil {
		return nil, fmt.Errorf("-http: %w", err)
	}
	web := &http.Server{Handler: debugview.Handler(rec), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = web.Serve(l) }()
	fmt.Fprintf(stdout, "network debugger on http://%s/\n", l.Addr())
	return web, nil
}

// debuggerAddr is where the debugger page listens for -http addr: the page
// has no authentication, so a port alone (":8080") binds the loopback
// interface; another interface must be named (e.g. 0.0.0.0:8080).
func debuggerAddr(addr string) string {
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// serverCert loads the development certificate from dir, or creates it
// there.
func serverCert(dir string) (*quic.DevCert, error) {
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if c, err := quic.LoadDevCert(certFile, keyFile); err == nil && time.Now().Before(c.Leaf.NotAfter) {
		return c, nil
	}
	c, err := quic.GenerateDevCert(0)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return c, c.WriteFiles(certFile, keyFile)
}

// frameInterval is the loop period: the server simulates fixed 60 Hz ticks
// within it, and bots sample input, send and interpolate every frame.
const frameInterval = time.Second / 240

// loop runs frames in real time until ctx ends, printing a status line
// every second.
func loop(ctx context.Context, a *Arena, stdout io.Writer) error {
	t := time.NewTicker(frameInterval)
	defer t.Stop()
	next := time.Now().Add(time.Second)
	for {
		now := time.Now()
		if err := a.Frame(now); err != nil {
			return err
		}
		if !now.Before(next) {
			fmt.Fprintln(stdout, a.Status(now))
			next = next.Add(time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
