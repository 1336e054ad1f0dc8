package snapshot

import "errors"

// decompressor decodes zstd bodies (see zstd.go); the zero value has no
// decoder and rejects compressed datagrams until one is configured.
type decompressor struct {
	fn func(src []byte) ([]byte, error)
}

var errNoDecompressor = errors.New("snapshot: compressed datagram but no decompressor")

func (d *decompressor) decompress(src []byte) ([]byte, error) {
	if d.fn == nil {
		return nil, errNoDecompressor
	}
	return d.fn(src)
}
