package replication

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
)

// On a protocol hash mismatch a server lists its components in its Reject
// (transport.Reject.Protocol), so that the client can name the one that
// differs:
//
//	count u8 (1..maxRejectComponents)
//	count × { name uvarint-prefixed | layout hash u64 BE | field paths uvarint-prefixed, comma-separated }
const (
	maxRejectComponents   = 64  // a registry holds at most 64
	maxComponentNameLen   = 64  // bound of componentHash.Name
	maxComponentFieldsLen = 128 // bound of componentHash.Fields
)

// componentHash is one registered component as a Reject describes it:
// enough for a client to tell which of its components differs from the
// server's.
type componentHash struct {
	Name   string // registered name; at most maxComponentNameLen bytes
	Hash   uint64 // hash of the component's replicated layout (name, fields, precision)
	Fields string // its field paths, comma-separated; at most maxComponentFieldsLen bytes
}

// newComponentHash describes a component with name and the comma-joined
// fields shortened to their bounds (a shortened field list ends in ",...";
// the hash still covers everything).
func newComponentHash(name string, hash uint64, fields []string) componentHash {
	f := strings.Join(fields, ",")
	if len(f) > maxComponentFieldsLen {
		f = transport.TruncateReason(f, maxComponentFieldsLen-4)
		if i := strings.LastIndexByte(f, ','); i >= 0 {
			f = f[:i]
		}
		f += ",..."
	}
	return componentHash{Name: transport.TruncateReason(name, maxComponentNameLen), Hash: hash, Fields: f}
}

// componentHashes describes reg's components for a Reject: name, own hash
// and field paths, in id order.
func componentHashes(reg *schema.Registry) []componentHash {
	plans := reg.Plans()
	out := make([]componentHash, 0, len(plans))
	for _, p := range plans {
		fields := make([]string, len(p.Groups()))
		for i, g := range p.Groups() {
			fields[i] = g.Name
		}
		out = append(out, newComponentHash(p.Name, p.Hash(), fields))
	}
	return out
}

// appendComponents appends the list cs (at most maxRejectComponents, each
// within its bounds: newComponentHash keeps to them; none: nothing).
func appendComponents(b []byte, cs []componentHash) []byte {
	if len(cs) == 0 {
		return b
	}
	b = append(b, byte(len(cs)))
	for _, c := range cs {
		b = binary.AppendUvarint(b, uint64(len(c.Name)))
		b = append(b, c.Name...)
		b = binary.BigEndian.AppendUint64(b, c.Hash)
		b = binary.AppendUvarint(b, uint64(len(c.Fields)))
		b = append(b, c.Fields...)
	}
	return b
}

// parseComponents decodes a component list (nil for none), checking every
// count and length against its bound before using it.
func parseComponents(b []byte) ([]componentHash, error) {
	if len(b) == 0 {
		return nil, nil
	}
	n := int(b[0])
	if n == 0 || n > maxRejectComponents {
		return nil, fmt.Errorf("%w: component count %d not in 1..%d", ErrMalformed, n, maxRejectComponents)
	}
	b = b[1:]
	field := func(what string, max int) (string, error) {
		l, k := minimalUvarint(b)
		if k <= 0 || l > uint64(max) || uint64(len(b)-k) < l {
			return "", fmt.Errorf("%w: component %s of %d bytes (at most %d, %d left)", ErrMalformed, what, l, max, len(b))
		}
		s := string(b[k : k+int(l)])
		b = b[k+int(l):]
		return s, nil
	}
	cs := make([]componentHash, 0, n)
	for range n {
		var c componentHash
		var err error
		if c.Name, err = field("name", maxComponentNameLen); err != nil {
			return nil, err
		}
		if len(b) < 8 {
			return nil, fmt.Errorf("%w: component hash truncated", ErrMalformed)
		}
		c.Hash, b = binary.BigEndian.Uint64(b), b[8:]
		if c.Fields, err = field("fields", maxComponentFieldsLen); err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the component list", ErrMalformed, len(b))
	}
	return cs, nil
}

// explainReject is the client's error for the server's Reject rj: on a
// protocol hash mismatch it names the components that differ between the
// server's list and reg (a list that does not parse explains nothing).
func explainReject(rj transport.Reject, reg *schema.Registry) *transport.HandshakeError {
	he := rj.Err(ProtocolVersion, reg.Hash())
	if he.Kind == transport.HandshakeHashMismatch {
		if server, err := parseComponents(rj.Protocol); err == nil {
			he.Detail = diffComponents(server, componentHashes(reg))
		}
	}
	return he
}

// rejectFor is the Reject a server with registry reg sends for he: with
// its component list on a protocol hash mismatch.
func rejectFor(he *transport.HandshakeError, hash uint64, reg *schema.Registry) transport.Reject {
	rj := he.Reject(ProtocolVersion, hash)
	if he.Kind == transport.HandshakeHashMismatch {
		rj.Protocol = appendComponents(nil, componentHashes(reg))
	}
	return rj
}

// maxDiffs bounds how many differences diffComponents names.
const maxDiffs = 4

// diffComponents says how the server's components differ from the client's (both
// in id order, as componentHash lists), for the message of a protocol hash
// mismatch, e.g.
//
//	component 2 differs: server "Avatar" (fields X,Z) vs client "Avatar" (fields X,Y)
//	component 1: server registers "Projectile" where the client registers "Avatar"
//	client lacks component "Foo" (server component 3)
//
// Components registered on one side only are named first (as a pair when both sides
// have one at the same id), then registration-order differences, then components of
// the same name whose layouts differ; at most a few differences are listed. It returns "" when it finds none (server is empty: the
// server sent no list; or the hashes differ outside the components).
func diffComponents(server, client []componentHash) string {
	if len(server) == 0 {
		return ""
	}
	var diffs []string
	more := 0
	add := func(format string, args ...any) {
		if len(diffs) < maxDiffs {
			diffs = append(diffs, fmt.Sprintf(format, args...))
		} else {
			more++
		}
	}
	sIdx, cIdx := indexByName(server), indexByName(client)
	missing := false
	swapped := map[int]bool{} // positions where each side has a component the other lacks
	for i := range min(len(server), len(client)) {
		s, c := server[i].Name, client[i].Name
		if _, ok := cIdx[s]; !ok {
			if _, ok := sIdx[c]; !ok {
				add("component %d: server registers %q where the client registers %q", i, s, c)
				swapped[i], missing = true, true
			}
		}
	}
	for i, c := range server {
		if _, ok := cIdx[c.Name]; !ok && !swapped[i] {
			add("client lacks component %q (server component %d)", c.Name, i)
			missing = true
		}
	}
	for i, c := range client {
		if _, ok := sIdx[c.Name]; !ok && !swapped[i] {
			add("server lacks component %q (client component %d)", c.Name, i)
			missing = true
		}
	}
	if !missing {
		for i := range min(len(server), len(client)) {
			if server[i].Name != client[i].Name {
				add("component %d: server registers %q where the client registers %q (registration order differs)", i, server[i].Name, client[i].Name)
				break
			}
		}
	}
	for i, s := range server {
		j, ok := cIdx[s.Name]
		if !ok || client[j].Hash == s.Hash {
			continue
		}
		c := client[j]
		if s.Fields == c.Fields {
			add("component %d differs: %q has the same fields (%s) on both sides but other precision or field types", i, s.Name, s.Fields)
		} else {
			add("component %d differs: server %q (fields %s) vs client %q (fields %s)", i, s.Name, s.Fields, c.Name, c.Fields)
		}
	}
	if more > 0 {
		diffs = append(diffs, fmt.Sprintf("and %d more", more))
	}
	return strings.Join(diffs, "; ")
}

// indexByName maps each name to its first index.
func indexByName(cs []componentHash) map[string]int {
	m := make(map[string]int, len(cs))
	for i, c := range cs {
		if _, dup := m[c.Name]; !dup {
			m[c.Name] = i
		}
	}
	return m
}
