//go:build !js

package replication

import (
	"crypto/rand"

	"github.com/archenet/archenet/replication/internal/wire"
)

// newSecret draws a seat's resume secret.
func newSecret() [wire.SecretLen]byte {
	var b [wire.SecretLen]byte
	_, _ = rand.Read(b[:]) // (crypto/rand does not fail)
	return b
}
