package wire

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
//	count u8 (1..MaxRejectComponents)
//	count × { name uvarint-prefixed | layout hash u64 BE | field paths uvarint-prefixed, comma-separated }
const (
	MaxRejectComponents   = 128 // a registry holds at most 64 components and 64 message types
	MaxComponentNameLen   = 64  // bound of ComponentHash.Name
	MaxComponentFieldsLen = 128 // bound of ComponentHash.Fields
)

// ComponentHash is one registered component as a Reject describes it:
// enough for a client to tell which of its components differs from the
// server's.
type ComponentHash struct {
	Name   string // registered name; at most MaxComponentNameLen bytes
	Hash   uint64 // hash of the component's replicated layout (name, fields, precision)
	Fields string // its field paths, comma-separated; at most MaxComponentFieldsLen bytes
}

// NewComponentHash describes a component with name and the comma-joined
// fields shortened to their bounds (a shortened field list ends in ",...";
// the hash still covers everything).
func NewComponentHash(name string, hash uint64, fields []string) ComponentHash {
	f := strings.Join(fields, ",")
	if len(f) > MaxComponentFieldsLen {
		f = transport.TruncateReason(f, MaxComponentFieldsLen-4)
		if i := strings.LastIndexByte(f, ','); i >= 0 {
			f = f[:i]
		}
		f += ",..."
	}
	return ComponentHash{Name: transport.TruncateReason(name, MaxComponentNameLen), Hash: hash, Fields: f}
}

// messagePrefix starts the names of message types in a component list.
const messagePrefix = "msg:"

// ComponentHashes describes reg's components, then its message types (their
// names prefixed "msg:"), for a Reject: name, own hash and field paths, in
// id order. Field lists are cut, last entries first, so that the list fits
// transport.MaxRejectProtocolLen.
func ComponentHashes(reg *schema.Registry) []ComponentHash {
	plans := reg.Plans()
	out := make([]ComponentHash, 0, len(plans)+len(reg.Messages()))
	add := func(prefix string, p *schema.Plan) {
		fields := make([]string, len(p.Groups()))
		for i, g := range p.Groups() {
			fields[i] = g.Name
		}
		out = append(out, NewComponentHash(prefix+p.Name, p.Hash(), fields))
	}
	for _, p := range plans {
		add("", p)
	}
	for _, p := range reg.Messages() {
		add(messagePrefix, p)
	}
	return FitComponents(out)
}

// MaxComponentsLen bounds a component list so that the largest Reject
// (reason of transport.MaxReasonLen bytes) stays a first message
// (transport.MaxHandshakeMessageSize) and within
// transport.MaxRejectProtocolLen.
var MaxComponentsLen = min(transport.MaxRejectProtocolLen,
	transport.MaxHandshakeMessageSize-(transport.Reject{Reason: strings.Repeat("r", transport.MaxReasonLen)}).Len())

// FitComponents cuts the field lists of cs ("..."), last entries first,
// until the list's encoding fits MaxComponentsLen (cs of at most
// MaxRejectComponents entries within their bounds always fits then).
func FitComponents(cs []ComponentHash) []ComponentHash {
	for i := len(cs) - 1; i >= 0 && ComponentsLen(cs) > MaxComponentsLen; i-- {
		cs[i].Fields = "..."
	}
	return cs
}

// AppendComponents appends the list cs (at most MaxRejectComponents, each
// within its bounds: NewComponentHash keeps to them; none: nothing).
func AppendComponents(b []byte, cs []ComponentHash) []byte {
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

// ComponentsLen returns the length of cs's encoding (AppendComponents).
func ComponentsLen(cs []ComponentHash) int {
	if len(cs) == 0 {
		return 0
	}
	n := 1
	for _, c := range cs {
		n += uvarintLen(uint64(len(c.Name))) + len(c.Name) + 8 + uvarintLen(uint64(len(c.Fields))) + len(c.Fields)
	}
	return n
}

// ParseComponents decodes a component list (nil for none), checking every
// count and length against its bound before using it.
func ParseComponents(b []byte) ([]ComponentHash, error) {
	if len(b) == 0 {
		return nil, nil
	}
	n := int(b[0])
	if n == 0 || n > MaxRejectComponents {
		return nil, fmt.Errorf("%w: component count %d not in 1..%d", ErrMalformed, n, MaxRejectComponents)
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
	cs := make([]ComponentHash, 0, n)
	for range n {
		var c ComponentHash
		var err error
		if c.Name, err = field("name", MaxComponentNameLen); err != nil {
			return nil, err
		}
		if len(b) < 8 {
			return nil, fmt.Errorf("%w: component hash truncated", ErrMalformed)
		}
		c.Hash, b = binary.BigEndian.Uint64(b), b[8:]
		if c.Fields, err = field("fields", MaxComponentFieldsLen); err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the component list", ErrMalformed, len(b))
	}
	return cs, nil
}

// maxDiffs bounds how many differences DiffComponents names.
const maxDiffs = 4

// DiffComponents says how the server's components differ from the client's (both
// in id order, as ComponentHash lists), for the message of a protocol hash
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
func DiffComponents(server, client []ComponentHash) string {
	if len(server) == 0 {
		return ""
	}
	sc, sm := splitMessages(server)
	cc, cm := splitMessages(client)
	var diffs []string
	more := 0
	diffList(sc, cc, "component", &diffs, &more)
	diffList(sm, cm, "message", &diffs, &more)
	if more > 0 {
		diffs = append(diffs, fmt.Sprintf("and %d more", more))
	}
	return strings.Join(diffs, "; ")
}

// splitMessages splits a list into its components and its message types
// (their names without the prefix).
func splitMessages(cs []ComponentHash) (comps, msgs []ComponentHash) {
	for _, c := range cs {
		if name, ok := strings.CutPrefix(c.Name, messagePrefix); ok {
			c.Name = name
			msgs = append(msgs, c)
		} else {
			comps = append(comps, c)
		}
	}
	return comps, msgs
}

// diffList adds the differences of two lists of one kind (noun) to diffs
// (at most maxDiffs in all; more counts the rest).
func diffList(server, client []ComponentHash, noun string, diffs *[]string, more *int) {
	add := func(format string, args ...any) {
		if len(*diffs) < maxDiffs {
			*diffs = append(*diffs, fmt.Sprintf(strings.ReplaceAll(format, "component", noun), args...))
		} else {
			*more++
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
}

// indexByName maps each name to its first index.
func indexByName(cs []ComponentHash) map[string]int {
	m := make(map[string]int, len(cs))
	for i, c := range cs {
		if _, dup := m[c.Name]; !dup {
			m[c.Name] = i
		}
	}
	return m
}
