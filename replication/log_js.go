//go:build js

package replication

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"syscall/js"

	"github.com/archenet/archenet/transport"
)

// defaultLogger is a nil ClientConfig.Logger in a page: the browser's
// console. Not slog.Default(): that would link slog's handlers (and the JSON
// and reflection code they bring) into every page.
func defaultLogger() transport.Logger { return consoleLogger{} }

// consoleLogger writes INFO and above to the browser's console as
// "msg key=value ...", at the console level of the record's.
type consoleLogger struct{}

func (consoleLogger) Log(_ context.Context, level slog.Level, msg string, args ...any) {
	if level < slog.LevelInfo {
		return
	}
	var b strings.Builder
	b.WriteString(msg)
	for i := 0; i+1 < len(args); i += 2 {
		fmt.Fprintf(&b, " %v=%v", args[i], args[i+1])
	}
	if len(args)%2 == 1 {
		fmt.Fprintf(&b, " !BADKEY=%v", args[len(args)-1])
	}
	method := "info"
	switch {
	case level >= slog.LevelError:
		method = "error"
	case level >= slog.LevelWarn:
		method = "warn"
	}
	console := js.Global().Get("console")
	if console.Truthy() {
		console.Call(method, b.String())
	}
}
