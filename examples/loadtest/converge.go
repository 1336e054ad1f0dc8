package main

import (
	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/replicationtest"
)

// hysteresis is the server's default Interest.Hysteresis: a relevant entity
// stays relevant until it is farther than Radius × (1 + hysteresis).
const hysteresis = 0.15

// checkConverged compares every client's mirrors with the server's
// replicated entities at the quantized level (replicationtest.Converged, the
// check of the integration tests): every mirror is a server entity with the
// same component set and quantized state; with interest, every server
// entity within the radius of the client's focus, and every entity it owns,
// is mirrored, and nothing farther than radius × (1 + hysteresis) is
// (between the two, either is right); without interest, every server entity
// is mirrored. focus returns a client's point of interest (x/z plane, like
// the server's interest grid).
func (r *rig) checkConverged(focus func(p *peer) (components.Vec3, bool)) error {
	for _, p := range r.peers {
		c := replicationtest.Check{Registry: r.reg, Server: r.sw, NetID: r.srv.NetID, Client: p.w, Me: p.c.ID()}
		if r.cfg.Interest > 0 {
			f, ok := focus(p)
			c.Relevance = replicationtest.Within(r.sw, c.Me, &replication.Interest{Radius: r.cfg.Interest, Hysteresis: hysteresis}, f, ok)
		}
		if err := replicationtest.Converged(c); err != nil {
			return err
		}
	}
	return nil
}
