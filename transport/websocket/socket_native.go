//go:build !js

package websocket

import (
	"context"
	"errors"
	"io"

	ws "github.com/coder/websocket"

	"github.com/archenet/archenet/transport"
)

// nativeSocket is a coder/websocket connection.
type nativeSocket struct{ c *ws.Conn }

func (s nativeSocket) next(ctx context.Context) (bool, io.Reader, error) {
	typ, r, err := s.c.Reader(ctx)
	return typ == ws.MessageBinary, r, err
}

func (s nativeSocket) write(ctx context.Context, b []byte) error {
	return s.c.Write(ctx, ws.MessageBinary, b)
}

// writeDatagram waits like write: the outbox drops the oldest waiting
// datagram meanwhile.
func (s nativeSocket) writeDatagram(ctx context.Context, b []byte) error { return s.write(ctx, b) }

func (s nativeSocket) closeNow()          { _ = s.c.CloseNow() }
func (s nativeSocket) setReadLimit(n int) { s.c.SetReadLimit(int64(n)) }

// closeErrorOf maps the socket's end: a WebSocket close status of 4000 +
// code (from a peer that did not announce its close first) or a lost
// connection.
func closeErrorOf(err error) *transport.CloseError {
	var ce ws.CloseError
	switch {
	case errors.As(err, &ce) && ce.Code >= closeStatusBase && ce.Code < closeStatusBase+1000:
		return &transport.CloseError{Code: transport.CloseCode(ce.Code - closeStatusBase), Reason: ce.Reason, Remote: true}
	case errors.As(err, &ce) && ce.Code == ws.StatusNormalClosure:
		return &transport.CloseError{Code: transport.CodeNormal, Reason: ce.Reason, Remote: true}
	case errors.As(err, &ce):
		return &transport.CloseError{Code: transport.CodeProtocolError, Reason: "websocket: " + ce.Error(), Remote: true}
	case err == nil:
		return &transport.CloseError{Code: transport.CodeNormal, Reason: "connection closed"}
	default:
		return &transport.CloseError{Code: transport.CodeProtocolError, Reason: "websocket: connection lost: " + err.Error(), Remote: true}
	}
}
