package quic

// streamPreamble is the first byte the client writes on the message stream; frames
// (package transport/internal/frame) follow in both directions.
const streamPreamble = 0xA1
