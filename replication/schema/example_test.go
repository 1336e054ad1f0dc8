package schema_test

import (
	"fmt"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
)

// Ship is a replicated component: the tags give each field's precision.
type Ship struct {
	Pos    components.Vec3 `net:"world,step=0.01"`
	Yaw    float32         `net:"angle,bits=10"`
	Health uint8           `net:"range=0:100"`
	Ammo   uint16          `net:"range=0:999,owner"`
	Label  string          `net:"-"`
}

func Example() {
	reg := schema.NewRegistry()
	plan, err := schema.Register[Ship](reg)
	if err != nil {
		panic(err)
	}
	in := Ship{Pos: components.Vec3{X: 12.346, Y: 0, Z: -3.2}, Yaw: 1.0, Health: 87, Ammo: 30}

	lanes := make([]uint64, plan.NumLanes())
	schema.QuantizeValue(plan, &in, lanes)
	var w bitio.Writer
	plan.Write(&w, lanes, true) // to the owner
	owner := w.BitLen()
	w.Reset(nil)
	plan.Write(&w, lanes, false) // to everyone else: no Ammo
	fmt.Println("bits to owner:", owner, "to others:", w.BitLen())

	back := make([]uint64, plan.NumLanes())
	if err := plan.Read(bitio.NewReader(w.Bytes()), back, false); err != nil {
		panic(err)
	}
	var out Ship
	schema.DequantizeValue(plan, back, &out)
	fmt.Printf("%.2f %.2f %.2f yaw %.3f health %d ammo %d\n", out.Pos.X, out.Pos.Y, out.Pos.Z, out.Yaw, out.Health, out.Ammo)

	type Bad struct{ Speed float32 }
	_, err = schema.Register[Bad](reg)
	fmt.Println(err)
	// Output:
	// bits to owner: 80 to others: 70
	// 12.35 0.00 -3.20 yaw 1.000 health 87 ammo 0
	// schema: schema_test.Bad.Speed: float has no precision: add net:"range=MIN:MAX,step=S" (or bits=N), angle, world, or raw
}
