// Package watch follows which of the systems of a replication client's
// frame run, and names one that is needed and does not, so that a missing
// piece of wiring is loud instead of a client that silently stays
// "connecting", draws raw snapshots or sends no input.
package watch
