// Package inputlog is the server's input log of one client: it stores the
// frames of the client's input sections (deduplicated, at most MaxLead
// ticks ahead, rate-limited), hands out one input per tick (repeating the
// last one when a frame is missing, and reporting an outage past the
// codec's Hold), and tells the client its ack and input buffer depth.
//
// A [Log] decodes sections with a frames.Codec and is the decoder's
// frames.Baselines: its ring keeps stored frames, consumed or not, for
// MaxLead+128 ticks, so a section coded against an acked frame finds it.
// [Log.Receive] and [Log.Consume] are allocation-free; [Log.Stats] counts
// what the log saw.
package inputlog
