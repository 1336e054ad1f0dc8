package replication

import (
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
)

// componentHashes describes reg's components for a Reject: name, own hash
// and field paths, in id order (a registry holds at most 64, the Reject's
// bound).
func componentHashes(reg *schema.Registry) []transport.ComponentHash {
	plans := reg.Plans()
	out := make([]transport.ComponentHash, 0, len(plans))
	for _, p := range plans {
		fields := make([]string, len(p.Groups()))
		for i, g := range p.Groups() {
			fields[i] = g.Name
		}
		out = append(out, transport.NewComponentHash(p.Name, p.Hash(), fields))
	}
	return out
}

// explainReject is the client's error for the server's Reject rj: on a
// protocol hash mismatch it names the components that differ between the
// server's list and reg.
func explainReject(rj transport.Reject, reg *schema.Registry) *transport.HandshakeError {
	he := rj.Err(ProtocolVersion, reg.Hash())
	if he.Kind == transport.HandshakeHashMismatch && len(rj.Components) > 0 {
		he.Detail = transport.DiffComponents(rj.Components, componentHashes(reg))
	}
	return he
}

// rejectFor is the Reject a server with registry reg sends for he: with
// its component list on a protocol hash mismatch.
func rejectFor(he *transport.HandshakeError, hash uint64, reg *schema.Registry) transport.Reject {
	rj := he.Reject(ProtocolVersion, hash)
	if he.Kind == transport.HandshakeHashMismatch {
		rj.Components = componentHashes(reg)
	}
	return rj
}
