package replication

import (
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
)

// explainReject is the client's error for the server's Reject rj: on a
// protocol hash mismatch it names the components that differ between the
// server's list and reg (a list that does not parse explains nothing).
func explainReject(rj transport.Reject, reg *schema.Registry) *transport.HandshakeError {
	he := rj.Err(ProtocolVersion, reg.Hash())
	if he.Kind == transport.HandshakeHashMismatch {
		if server, err := wire.ParseComponents(rj.Protocol); err == nil {
			he.Detail = wire.DiffComponents(server, wire.ComponentHashes(reg))
		}
	}
	return he
}

// rejectFor is the Reject a server with registry reg sends for he: with
// its component list on a protocol hash mismatch.
func rejectFor(he *transport.HandshakeError, hash uint64, reg *schema.Registry) transport.Reject {
	rj := he.Reject(ProtocolVersion, hash)
	if he.Kind == transport.HandshakeHashMismatch {
		rj.Protocol = wire.AppendComponents(nil, wire.ComponentHashes(reg))
	}
	return rj
}
