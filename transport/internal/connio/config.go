package connio

import (
	"fmt"
	"time"
)

// Defaults applies the transports' rule for a config's numeric settings:
// zero takes the default, negative is an error naming the setting (where
// a negative value has a documented meaning, the caller handles the field
// itself). The first error is kept; later settings are left alone.
type Defaults struct {
	Pkg string // "quic", "webtransport": the error's prefix
	Err error
}

// Set applies the rule to setting name (*v), whose default is def.
func Set[T int | time.Duration](d *Defaults, name string, v *T, def T) {
	if d.Err != nil {
		return
	}
	if *v < 0 {
		d.Err = fmt.Errorf("%s: Config.%s %v is negative (0: the default, %v)", d.Pkg, name, *v, def)
		return
	}
	if *v == 0 {
		*v = def
	}
}
