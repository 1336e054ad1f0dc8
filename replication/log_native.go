//go:build !js

package replication

import (
	"log/slog"

	"github.com/archenet/archenet/transport"
)

// defaultLogger is a nil ClientConfig.Logger: slog.Default().
func defaultLogger() transport.Logger { return slog.Default() }
