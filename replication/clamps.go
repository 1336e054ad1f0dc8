package replication

import (
	"github.com/archenet/archenet/replication/internal/clampwatch"
	"github.com/archenet/archenet/replication/schema"
)

// ClampWarnEvery is how often at most the server warns about one field's
// clamped values.
const ClampWarnEvery = clampwatch.Every

// Clamps returns how often quantization clamped each field of the
// replicated components (values a field cannot represent: out of range,
// NaN, ±Inf), per component type and field; fields never clamped are
// omitted. The counts are the registry's ([schema.Registry.Clamps]), so a
// client or input codec sharing the registry in the same process adds to
// them. Allocates; for stats, not for every tick.
func (s *Server) Clamps() []schema.ClampCount { return s.cfg.Registry.Clamps() }
