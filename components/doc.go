// Package components holds the data users attach to replicated entities:
// vector and quaternion math types, the standard Transform and Velocity with
// default wire precision, network identity (NetID, Owner), references to
// replicated entities (Ref, for message and component fields), and the
// markers that select how an entity replicates (Replicated, Predicted,
// Interpolated).
package components
