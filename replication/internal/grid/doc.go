// Package grid is interest management's spatial index: a grid over the
// x/z plane of the entities with a position, rebuilt from the positions
// the frame build notes (or brought up to date by moving the entities that
// changed cells), and each client's relevance from it: the entities near
// its focus, with hysteresis (an entity stays relevant until it is past
// the leave radius), the entities without a position, and the entities it
// owns.
//
// The server owns a [Grid] and calls it from its tick: [Grid.BeginPositions]
// and [Grid.NotePos] while the frame is built, [Grid.Rebuild] when
// relevance is due, and [Grid.RelevantFor] for each client on the workers
// (concurrently: it reads the grid and writes only the client's
// [Relevance] and the worker's scratch).
package grid
