package wire

import (
	"strings"
	"testing"

	"github.com/archenet/archenet/transport"
	"github.com/stretchr/testify/require"
)

func TestRejectComponentsRoundTripAndBound(t *testing.T) {
	var cs []ComponentHash
	for i := range MaxRejectComponents {
		fields := make([]string, 64)
		for j := range fields {
			fields[j] = strings.Repeat("F", 20)
		}
		cs = append(cs, NewComponentHash(strings.Repeat("N", 100), uint64(i), fields))
	}
	require.LessOrEqual(t, len(cs[0].Name), MaxComponentNameLen)
	require.LessOrEqual(t, len(cs[0].Fields), MaxComponentFieldsLen)
	require.True(t, strings.HasSuffix(cs[0].Fields, ",..."))
	cs = FitComponents(cs)
	require.True(t, strings.HasSuffix(cs[0].Fields, ",..."), "the first entries keep their fields")
	require.Equal(t, "...", cs[len(cs)-1].Fields)
	r := transport.Reject{Code: transport.CodeHandshakeFailed, Version: 4, ProtocolHash: 7,
		Reason: strings.Repeat("r", transport.MaxReasonLen), Protocol: AppendComponents(nil, cs)}
	require.LessOrEqual(t, len(r.Protocol), transport.MaxRejectProtocolLen)
	b := r.Append(nil)
	require.Len(t, b, r.Len())
	require.LessOrEqual(t, len(b), transport.MaxHandshakeMessageSize, "the largest Reject fits a first message")
	got, err := transport.ParseReject(b)
	require.NoError(t, err)
	require.Equal(t, r, got)
	back, err := ParseComponents(got.Protocol)
	require.NoError(t, err)
	require.Equal(t, cs, back)

	// Without components the encoding is the one older clients read.
	r.Protocol = AppendComponents(nil, nil)
	require.Len(t, r.Append(nil), 1+2+2+8+2+transport.MaxReasonLen)
	got, err = transport.ParseReject(r.Append(nil))
	require.NoError(t, err)
	require.Nil(t, got.Protocol)
	require.Equal(t, r.Len(), len(r.Append(nil)))
	none, err := ParseComponents(got.Protocol)
	require.NoError(t, err)
	require.Nil(t, none)

	// Hostile lists.
	for _, bad := range [][]byte{{65}, {0}, {1, 0x41, 'A'}, {1, 1, 'A', 0, 0, 0, 0, 0, 0, 0, 7, 0, 0xff}, {1, 0x81, 0x00, 'A', 0, 0, 0, 0, 0, 0, 0, 7, 0}} {
		_, err := ParseComponents(bad)
		require.ErrorIs(t, err, ErrMalformed, "%x", bad)
	}
}

func TestDiffComponents(t *testing.T) {
	a := ComponentHash{Name: "A", Hash: 1, Fields: "X"}
	b := ComponentHash{Name: "B", Hash: 2, Fields: "Y"}
	b2 := ComponentHash{Name: "B", Hash: 3, Fields: "Y,Z"}
	require.Equal(t, "", DiffComponents(nil, []ComponentHash{a}))
	require.Equal(t, "", DiffComponents([]ComponentHash{a, b}, []ComponentHash{a, b}))
	require.Equal(t, `component 1 differs: server "B" (fields Y) vs client "B" (fields Y,Z)`,
		DiffComponents([]ComponentHash{a, b}, []ComponentHash{a, b2}))
	var many, other []ComponentHash
	for i := range 10 {
		many = append(many, ComponentHash{Name: string(rune('a' + i))})
		other = append(other, ComponentHash{Name: string(rune('A' + i))})
	}
	d := DiffComponents(many, other)
	require.Contains(t, d, `component 0: server registers "a" where the client registers "A"`)
	require.True(t, strings.HasSuffix(d, "; and 6 more"), d)
}
