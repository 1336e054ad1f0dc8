package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/archenet/archenet/examples/arena/game"
	"github.com/archenet/archenet/replication/host"
	"github.com/archenet/archenet/replication/host/agones"
	"github.com/archenet/archenet/transport/quic"
)

// runAgones is -agones: the arena server as a game server under Agones. A
// host (replication/host) accepts on -addr; the driver (replication/host/
// agones) marks the GameServer Ready, pings Health while every match
// ticks, opens the match an allocation names (label or annotation
// "match", else -match) as an arena, reports players, and when ctx ends
// (SIGTERM, -duration) drains for -drain and shuts the GameServer down.
func runAgones(ctx context.Context, o options, stdout io.Writer, logger *slog.Logger) error {
	cert, err := serverCert(o.cert)
	if err != nil {
		return err
	}
	ln, err := quic.Listen(o.addr, &quic.Config{TLS: cert.ServerTLS(), Logger: logger})
	if err != nil {
		return err
	}
	seed := o.seed
	open := func(h *host.Host, name string) error {
		_, err := h.Open(name, host.MatchConfig{FrameRate: 240, Start: func(m *host.Match) (host.Game, error) {
			seed++
			return game.NewServerGame(game.ServerOptions{Listener: m.Listener(), NPCs: o.npcs, Interest: o.interest, Seed: seed,
				Workers: 1, Logger: logger})
		}})
		if err == nil {
			fmt.Fprintf(stdout, "match %q open\n", name)
		}
		return err
	}
	// The driver first: it needs no host until Run, and the host's hooks
	// report to it.
	last := ""
	state := func(st string) { // (the driver's goroutine, in order)
		if last == "" {
			fmt.Fprintf(stdout, "agones state %s\n", st)
		} else {
			fmt.Fprintf(stdout, "agones state %s → %s\n", last, st)
		}
		last = st
	}
	d, err := agones.New(agones.Config{URL: o.agonesURL, Capacity: 64, DefaultMatch: o.match, OpenMatch: open, OnState: state, Logger: logger})
	if err != nil {
		_ = ln.Close()
		return err
	}
	hc := host.Config{Logger: logger}
	d.Configure(&hc)
	h, err := host.New(ln, hc)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer h.Close()
	if o.http != "" {
		stop, err := serveProbes(h, o.http, stdout)
		if err != nil {
			return err
		}
		defer stop()
	}
	fmt.Fprintf(stdout, "arena game server on %s (QUIC) under Agones; matches open on allocation (label \"match\", default %q)\n", ln.Addr(), o.match)
	fmt.Fprintf(stdout, "development certificate in %s; join with: go run ./examples/arena -mode client -addr %s -cert %s -match NAME\n", o.cert, ln.Addr(), o.cert)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(context.Background(), h) }()
	agonesStatus(ctx, h, d, stdout)
	fmt.Fprintf(stdout, "draining (up to %v)\n", o.drain)
	h.Drain("server shutting down", time.Now().Add(o.drain))
	select {
	case err := <-ran:
		fmt.Fprintf(stdout, "summary: %d matches opened, %d clients routed, game server %s\n", h.Stats().Opened, h.Stats().Routed, d.State())
		return err
	case <-time.After(o.drain + 15*time.Second):
		return errors.New("the Agones sidecar did not take the Shutdown")
	}
}

// agonesStatus prints a status line every second until ctx ends.
func agonesStatus(ctx context.Context, h *host.Host, d *agones.Driver, stdout io.Writer) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, ds := h.Stats(), d.Stats()
		rooms := "-"
		if ds.Rooms >= 0 {
			rooms = strconv.FormatInt(ds.Rooms, 10)
		}
		fmt.Fprintf(stdout, "agones %s matches %d rooms %s clients %d health pings %d\n", d.State(), len(st.Matches), rooms, st.Clients, ds.Pings)
	}
}

// serveProbes serves /healthz, /readyz and /stats on addr (a port alone
// binds 127.0.0.1, as the debugger page does).
func serveProbes(h *host.Host, addr string, stdout io.Writer) (func(), error) {
	l, err := net.Listen("tcp", debuggerAddr(addr))
	if err != nil {
		return nil, fmt.Errorf("-http: %w", err)
	}
	web := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = web.Serve(l) }()
	fmt.Fprintf(stdout, "probes on http://%s/healthz and /readyz\n", l.Addr())
	return func() { _ = web.Close() }, nil
}
