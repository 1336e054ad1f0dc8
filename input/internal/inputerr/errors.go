package inputerr

import "errors"

var (
	// ErrMalformed: an input section (or input feedback) no encoder
	// produces: truncated, a count above the limit, a code outside its
	// lane's range, a residual that leaves the range. Package input
	// exports it as input.ErrMalformed.
	ErrMalformed = errors.New("input: malformed input section")
	// ErrInvalidConfig wraps every configuration error. Package input
	// exports it as input.ErrInvalidConfig.
	ErrInvalidConfig = errors.New("input: invalid configuration")
)
