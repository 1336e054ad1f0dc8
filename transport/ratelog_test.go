package transport_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/stretchr/testify/require"
)

func TestRateLimit(t *testing.T) {
	var buf bytes.Buffer
	h := transport.RateLimit(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}), 2, time.Second)
	log := slog.New(h).With("side", "server")
	t0 := time.Unix(1000, 0)
	emit := func(at time.Duration, msg string) {
		r := slog.NewRecord(t0.Add(at), slog.LevelWarn, msg, 0)
		require.NoError(t, log.Handler().Handle(context.Background(), r))
	}
	for i := range 50 {
		emit(time.Duration(i)*time.Millisecond, "no hello in time")
	}
	emit(60*time.Millisecond, "client connected") // another message has its own budget
	emit(1100*time.Millisecond, "no hello in time")
	emit(1200*time.Millisecond, "no hello in time")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Equal(t, []string{
		`level=WARN msg="no hello in time" side=server`,
		`level=WARN msg="no hello in time" side=server`,
		`level=WARN msg="client connected" side=server`,
		`level=WARN msg="no hello in time" side=server suppressed=48`,
	}, lines)
}
