package replication

import (
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
)

// rejectFor is the Reject a server with registry reg sends for he: with
// its component list on a protocol hash mismatch.
func rejectFor(he *transport.HandshakeError, hash uint64, reg *schema.Registry) transport.Reject {
	rj := he.Reject(ProtocolVersion, hash)
	if he.Kind == transport.HandshakeHashMismatch {
		rj.Protocol = wire.AppendComponents(nil, wire.ComponentHashes(reg))
	}
	return rj
}
