package components

// Visual is the transform to draw an entity with: position and rotation.
//
// On a client the renderer reads Visual and never the authoritative state.
// For remote entities the interpolation system (package interp) writes it
// from buffered snapshots at the render time, behind the server on purpose;
// for the locally predicted entity the correction smoother writes it as the
// predicted state plus a decaying correction offset. Keeping the drawn
// transform separate lets the simulation snap to the truth while the screen
// moves smoothly.
type Visual struct {
	Pos Vec3
	Rot Quat
}
