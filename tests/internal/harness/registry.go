package harness

import (
	"io"
	"log/slog"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
	"github.com/mlange-42/arche/ecs"
)

// Health is a replicated component with an owner-only field.
type Health struct {
	HP   int16  `net:"range=0:1000"`
	Ammo uint16 `net:"range=0:500,owner"`
}

// Team is a small replicated tag component.
type Team struct {
	ID uint8 `net:"range=0:7"`
}

// Hit is a test message about an entity (server → client).
type Hit struct {
	Target components.Ref
	Damage int16 `net:"range=0:1000"`
	Seq    uint32
}

// Use is a test message naming an entity (client → server).
type Use struct {
	Target components.Ref
	Seq    uint32
}

// Aim is a replicated component naming another entity.
type Aim struct {
	At components.Ref
}

// AttachedTo is a replicated relation component (arche's entity
// relation): its target is replicated, mapped to the clients' mirrors.
type AttachedTo struct {
	ecs.Relation
}

// Note is a test message of exactly 8 bytes of payload.
type Note struct {
	Text [8]uint8 `net:"range=0:255"`
}

// NewRegistry registers the components the tests replicate: Transform,
// Velocity, Health, Team, Predicted, Aim and AttachedTo; and the messages
// Hit, Use and Note.
func NewRegistry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[components.Velocity](reg)
	schema.MustRegister[Health](reg)
	schema.MustRegister[Team](reg)
	schema.MustRegister[components.Predicted](reg)
	schema.MustRegister[Aim](reg)
	schema.MustRegister[AttachedTo](reg)
	schema.MustRegisterMessage[Hit](reg)
	schema.MustRegisterMessage[Use](reg)
	schema.MustRegisterMessage[Note](reg)
	return reg
}

// Quiet is a logger that discards everything.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// NetRate is the servers' net rate (Hz).
const NetRate = 30

// TickDt is one net tick.
var TickDt = time.Second / NetRate
