//go:build !js

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hajimehoshi/ebiten/v2"

	"github.com/archenet/archenet/examples/arena/game"
	"github.com/archenet/archenet/transport/quic"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "arenaview:", err)
		return 2
	}
	_ = os.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	s, err := setup(o, stdout, logger)
	if err != nil {
		fmt.Fprintln(stderr, "arenaview:", err)
		return 1
	}
	defer s.close()
	v := newView(o, s)
	ebiten.SetWindowTitle("archenet arena")
	ebiten.SetWindowSize(o.width, o.height)
	ebiten.SetWindowResizingMode(ebiten.WindowResizingModeEnabled)
	ebiten.SetRunnableOnUnfocused(true)
	err = ebiten.RunGame(v)
	if err == nil {
		err = v.err
	}
	if err != nil {
		fmt.Fprintln(stderr, "arenaview:", err)
		return 1
	}
	for _, p := range v.saved {
		fmt.Fprintln(stdout, "screenshot", p)
	}
	fmt.Fprintln(stdout, v.summary())
	return 0
}

// setup starts the in-process server and its bots (unless -connect) and
// connects the player's client over QUIC.
func setup(o options, stdout io.Writer, logger *slog.Logger) (*session, error) {
	s := &session{input: &controls{}}
	qc := &quic.Config{}
	if o.connect == "" {
		cert, err := quic.GenerateDevCert(24 * time.Hour)
		if err != nil {
			return nil, err
		}
		ln, err := quic.Listen("127.0.0.1:0", &quic.Config{TLS: cert.ServerTLS()})
		if err != nil {
			return nil, err
		}
		server, err := game.NewServerGame(game.ServerOptions{Listener: ln, NPCs: o.npcs, Seed: o.seed, Logger: logger})
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		s.server = server
		s.addr = ln.Addr().String()
		qc.TLS = cert.ClientTLS()
		fmt.Fprintf(stdout, "arena server on %s (QUIC, in this process), %d NPCs, %d bots\n", s.addr, o.npcs, o.bots)
	} else {
		s.addr = o.connect
		if o.insecure {
			// DANGER: accepts any certificate; only for a throwaway local test.
			fmt.Fprintln(stdout, "WARNING: -insecure: the server certificate is NOT verified")
			qc.InsecureSkipVerify = true
		} else {
			cert, err := quic.LoadDevCert(filepath.Join(o.cert, "cert.pem"), filepath.Join(o.cert, "key.pem"))
			if err != nil {
				return nil, fmt.Errorf("loading the server's development certificate (start examples/arena -mode server first, with the same -cert): %w", err)
			}
			qc.TLS = cert.ClientTLS()
		}
	}
	dial := func() (*quic.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
		defer cancel()
		c, err := quic.Dial(ctx, s.addr, qc)
		if err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", s.addr, err)
		}
		return c, nil
	}
	// The player connects first: the server's clock starts with the first
	// Frame, so nobody waits on anybody here.
	conn, err := dial()
	if err != nil {
		s.close()
		return nil, err
	}
	if s.player, err = game.NewBot(game.BotOptions{Conn: conn, Logger: logger, Control: s.input.control}); err != nil {
		_ = conn.Close()
		s.close()
		return nil, err
	}
	if s.server != nil {
		for i := 0; i < o.bots; i++ {
			conn, err := dial()
			if err != nil {
				s.close()
				return nil, fmt.Errorf("bot %d: %w", i+1, err)
			}
			b, err := game.NewBot(game.BotOptions{Conn: conn, Seed: o.seed*1000 + uint64(i), Logger: logger})
			if err != nil {
				_ = conn.Close()
				s.close()
				return nil, err
			}
			s.bots = append(s.bots, b)
		}
	}
	return s, nil
}
