// Package mirror is a replication client's mirrors in its arche world: the
// table of mirrors by net slot, the spawn batches and decoded views written
// into them, their interpolation (the render clock, Transform → Visual
// buffers and in-place tracks) and the provisional entities of predicted
// spawns that the server's spawns adopt.
package mirror
