package transport

import (
	"context"
	"log/slog"
)

// Logger receives what a client-side part of archenet logs
// (replication.ClientConfig.Logger): a *slog.Logger satisfies it, so
// Logger: slog.Default() or slog.New(handler) is what a game passes.
//
// It is an interface, not a *slog.Logger, so that a page's WebAssembly
// build (GOOS=js) that never passes a *slog.Logger links none of slog's
// handlers, nor the JSON and reflection code they bring: about 120 KB of a
// gzipped page.
type Logger interface {
	Log(ctx context.Context, level slog.Level, msg string, args ...any)
}
