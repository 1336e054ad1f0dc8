// Package frames is the wire codec of input sections — a client's newest
// input frames, each field coded only when it changed, the oldest against
// a frame the server acknowledged holding — with the client's [Sender],
// which keeps the frames not yet acknowledged and writes the newest N into
// every datagram.
//
// A [Codec] is compiled once from the input struct's `net` precision tags
// (package schema). [Codec.AppendFrames] writes a section and
// [Codec.ReadFrames] decodes one into a reusable [Section], resolving an
// acknowledged baseline through [Baselines] (the server's input log). The
// section's bit layout, and why every section decodes on its own whatever
// was lost, are in package input's documentation.
//
// Decoding bounds everything the sender controls (the frame count by the
// codec's redundancy, every code by its lane's range) and returns errors
// wrapping inputerr.ErrMalformed or [ErrNoBaseline]; it never panics. Both
// directions are allocation-free once their buffers have grown.
package frames
