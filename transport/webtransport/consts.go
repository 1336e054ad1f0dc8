package webtransport

// MaxDatagramPayload is the largest datagram payload a connection sends or accepts in
// either direction. Browsers cap WebTransport datagrams at 1215 bytes
// (transport.datagrams.maxDatagramSize) and drop larger ones silently; 1200 is what
// every QUIC path carries, and what transport.Conn promises until MTU discovery.
const MaxDatagramPayload = 1200

// streamPreamble is the first byte the client writes on the message stream, as on
// transport/quic; frames (package transport/internal/frame) follow in both directions.
const streamPreamble = 0xA1

// DefaultPath is the URL path of the WebTransport endpoint when [Config].Path is empty.
const DefaultPath = "/archenet"
