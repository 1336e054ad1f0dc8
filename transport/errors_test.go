package transport_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/archenet/archenet/transport"
	"github.com/stretchr/testify/require"
)

func TestCloseError(t *testing.T) {
	var err error = &transport.CloseError{Code: transport.CodeFlood, Reason: "3000 datagrams/s", Remote: true}
	require.EqualError(t, err, "transport: connection closed by peer (flood): 3000 datagrams/s")
	require.ErrorIs(t, err, transport.ErrClosed)
	require.NotErrorIs(t, err, transport.ErrTimeout)
	wrapped := fmt.Errorf("tick 7: %w", err)
	var ce *transport.CloseError
	require.ErrorAs(t, wrapped, &ce)
	require.Equal(t, transport.CodeFlood, ce.Code)

	timeout := &transport.CloseError{Code: transport.CodeTimeout}
	require.ErrorIs(t, timeout, transport.ErrTimeout)
	require.True(t, timeout.Timeout())
	require.EqualError(t, timeout, "transport: connection closed locally (timeout)")
	require.False(t, errors.Is(transport.ErrClosed, transport.ErrTimeout))
}

func TestCloseCodeString(t *testing.T) {
	require.Equal(t, "normal", transport.CodeNormal.String())
	require.Equal(t, "message too large", transport.CodeMessageTooLarge.String())
	require.Equal(t, "application+3", (transport.CodeApplication + 3).String())
	require.Equal(t, "code 99", transport.CloseCode(99).String())
}

func TestTooLargeErrors(t *testing.T) {
	require.EqualError(t, &transport.DatagramTooLargeError{Size: 1300, Max: 1200},
		"transport: datagram of 1300 bytes exceeds the maximum payload of 1200 bytes")
	require.EqualError(t, &transport.MessageTooLargeError{Size: 5, Max: 4},
		"transport: message of 5 bytes exceeds the maximum of 4 bytes")
}
