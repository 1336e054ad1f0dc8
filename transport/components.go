package transport

import (
	"fmt"
	"strings"
)

// NewComponentHash returns the description of a component for a [Reject], with name
// and the comma-joined fields shortened to their bounds (a shortened field list ends
// in ",..."; the hash still covers everything).
func NewComponentHash(name string, hash uint64, fields []string) ComponentHash {
	f := strings.Join(fields, ",")
	if len(f) > MaxComponentFieldsLen {
		f = TruncateReason(f, MaxComponentFieldsLen-4)
		if i := strings.LastIndexByte(f, ','); i >= 0 {
			f = f[:i]
		}
		f += ",..."
	}
	return ComponentHash{Name: TruncateReason(name, MaxComponentNameLen), Hash: hash, Fields: f}
}

// maxDiffs bounds how many differences DiffComponents names.
const maxDiffs = 4

// DiffComponents says how the server's components differ from the client's (both
// in id order, as [ComponentHash] lists), for the message of a protocol hash
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
func indexByName(cs []ComponentHash) map[string]int {
	m := make(map[string]int, len(cs))
	for i, c := range cs {
		if _, dup := m[c.Name]; !dup {
			m[c.Name] = i
		}
	}
	return m
}
