package transport_test

import (
	"strings"
	"testing"

	"github.com/archenet/archenet/transport"
	"github.com/stretchr/testify/require"
)

func TestRejectComponentsRoundTripAndBound(t *testing.T) {
	var cs []transport.ComponentHash
	for i := range transport.MaxRejectComponents {
		fields := make([]string, 64)
		for j := range fields {
			fields[j] = strings.Repeat("F", 20)
		}
		cs = append(cs, transport.NewComponentHash(strings.Repeat("N", 100), uint64(i), fields))
	}
	require.LessOrEqual(t, len(cs[0].Name), transport.MaxComponentNameLen)
	require.LessOrEqual(t, len(cs[0].Fields), transport.MaxComponentFieldsLen)
	require.True(t, strings.HasSuffix(cs[0].Fields, ",..."))
	r := transport.Reject{Code: transport.CodeHandshakeFailed, Version: 4, ProtocolHash: 7,
		Reason: strings.Repeat("r", transport.MaxReasonLen), Components: cs}
	b := r.Append(nil)
	require.Len(t, b, r.Len())
	require.LessOrEqual(t, len(b), transport.MaxHandshakeMessageSize, "the largest Reject fits a first message")
	got, err := transport.ParseReject(b)
	require.NoError(t, err)
	require.Equal(t, r, got)

	// Without components the encoding is the one older clients read.
	r.Components = nil
	require.Len(t, r.Append(nil), 1+2+2+8+2+transport.MaxReasonLen)
	got, err = transport.ParseReject(r.Append(nil))
	require.NoError(t, err)
	require.Nil(t, got.Components)
	require.Equal(t, r.Len(), len(r.Append(nil)))
}

func TestDiffComponents(t *testing.T) {
	a := transport.ComponentHash{Name: "A", Hash: 1, Fields: "X"}
	b := transport.ComponentHash{Name: "B", Hash: 2, Fields: "Y"}
	b2 := transport.ComponentHash{Name: "B", Hash: 3, Fields: "Y,Z"}
	require.Equal(t, "", transport.DiffComponents(nil, []transport.ComponentHash{a}))
	require.Equal(t, "", transport.DiffComponents([]transport.ComponentHash{a, b}, []transport.ComponentHash{a, b}))
	require.Equal(t, `component 1 differs: server "B" (fields Y) vs client "B" (fields Y,Z)`,
		transport.DiffComponents([]transport.ComponentHash{a, b}, []transport.ComponentHash{a, b2}))
	var many, other []transport.ComponentHash
	for i := range 10 {
		many = append(many, transport.ComponentHash{Name: string(rune('a' + i))})
		other = append(other, transport.ComponentHash{Name: string(rune('A' + i))})
	}
	d := transport.DiffComponents(many, other)
	require.Contains(t, d, `component 0: server registers "a" where the client registers "A"`)
	require.True(t, strings.HasSuffix(d, "; and 6 more"), d)
}
