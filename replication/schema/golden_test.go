package schema

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt")

// goldenCases pin the wire encoding of a few component values. Any change of
// the bit layout, quantization or tag semantics shows up as a diff of
// testdata/golden.txt in review; regenerate with `go test -run Golden -update`.
func goldenCases() []struct {
	name  string
	plan  func(*Registry) *Plan
	value any
	owner bool
} {
	tr := transform{
		Pos: components.Vec3{X: 12.3456, Y: -0.5, Z: 1_000_000.25},
		Rot: components.QuatAxisAngle(components.Vec3{Y: 1}, 0.75),
	}
	sh := ship{
		Yaw: 1.25, Throttle: 0.42, Health: 150, Score: -1234567, Kills: 300, Alive: true,
		Ammo: 17, Spin: [3]float32{0.5, -3.25, 19.99},
		Vel:     components.Vec3{X: 4.5, Y: 0, Z: -12.34},
		Engines: [2]inner{{Heat: 0.3, Flags: 5}, {Heat: 0.9, Flags: 15}},
		Exact:   3.141592653589793, Exact32: 2.5,
		Scale: [4]float64{0, 0, 0, 1},
	}
	rest := sh
	rest.Vel = components.Vec3{X: 0.001}
	return []struct {
		name  string
		plan  func(*Registry) *Plan
		value any
		owner bool
	}{
		{"transform", func(r *Registry) *Plan { return MustRegister[transform](r) }, &tr, true},
		{"ship-owner", func(r *Registry) *Plan { return MustRegister[ship](r) }, &sh, true},
		{"ship-other", func(r *Registry) *Plan { return MustRegister[ship](r) }, &sh, false},
		{"ship-resting", func(r *Registry) *Plan { return MustRegister[ship](r) }, &rest, false},
	}
}

func encodeGolden(p *Plan, v any, owner bool) []byte {
	lanes := make([]uint64, p.NumLanes())
	switch x := v.(type) {
	case *transform:
		QuantizeValue(p, x, lanes)
	case *ship:
		QuantizeValue(p, x, lanes)
	case *kill:
		QuantizeValue(p, x, lanes)
	case *carried:
		QuantizeValue(p, x, lanes)
	}
	var w bitio.Writer
	p.Write(&w, lanes, owner)
	return append([]byte(nil), w.Bytes()...)
}

func TestGoldenBytes(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("# name bytes hex — wire encodings pinned by TestGoldenBytes\n")
	hashes := map[string]uint64{}
	for _, c := range goldenCases() {
		r := NewRegistry()
		p := c.plan(r)
		hashes[p.Name] = r.Hash()
		b := encodeGolden(p, c.value, c.owner)
		fmt.Fprintf(&sb, "%s %d %s\n", c.name, len(b), hex.EncodeToString(b))
	}
	fmt.Fprintf(&sb, "hash transform %016x\nhash ship %016x\n", hashes["transform"], hashes["ship"])
	const path = "testdata/golden.txt"
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(sb.String()), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), sb.String(), "wire layout changed; if intended run go test -run Golden -update and review the diff")
}
