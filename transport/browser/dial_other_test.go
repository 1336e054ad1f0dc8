//go:build !js

package browser_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport/browser"
)

// Outside a page, Dial says where it works instead of failing obscurely.
func TestDialOutsidePage(t *testing.T) {
	conn, via, err := browser.Dial(context.Background(), nil)
	require.ErrorIs(t, err, browser.ErrNotInPage)
	require.Nil(t, conn)
	require.Empty(t, via)
}
