package codec

import (
	"errors"
	"fmt"

	"github.com/archenet/archenet/replication/internal/wire"
)

// zstdEncoder and zstdDecoder are klauspost/compress's zstd (zstd_on.go), or
// nothing in a page built without the archenet_zstd tag (zstd_off.go), which
// then links no zstd: about 100 KB of a gzipped page.
type (
	zstdEncoder interface {
		EncodeAll(src, dst []byte) []byte
	}
	zstdDecoder interface {
		DecodeAll(src, dst []byte) ([]byte, error)
	}
)

// MaxBody bounds a decompressed datagram body: a hostile frame claiming
// more fails instead of allocating.
const MaxBody = 64 << 10

// Compressor compresses snapshot datagram bodies with zstd (fastest level,
// no checksum) and keeps the result only when it is strictly smaller: the
// datagram then carries wire.FlagCompressed. An optional dictionary trained on
// sample datagrams ([TrainDictionary]) helps small datagrams; server and
// clients must use the same one. Not safe for concurrent use.
type Compressor struct {
	enc zstdEncoder
	buf []byte
	// Tried and Won count datagrams offered and datagrams sent compressed.
	Tried, Won int
}

// NewCompressor returns a compressor; dict may be nil.
func NewCompressor(dict []byte) (*Compressor, error) {
	enc, err := newZstdEncoder(dict)
	if err != nil {
		return nil, fmt.Errorf("snapshot: zstd encoder: %w", err)
	}
	return &Compressor{enc: enc}, nil
}

// Compress returns the compressed body, or nil if it does not win (valid
// until the next call).
func (c *Compressor) Compress(body []byte) []byte {
	c.Tried++
	c.buf = c.enc.EncodeAll(body, c.buf[:0])
	if len(c.buf) >= len(body) {
		return nil
	}
	c.Won++
	return c.buf
}

// Decompressor decodes zstd datagram bodies; the zero value has no
// decoder and refuses compressed datagrams until [Decompressor.Enable].
type Decompressor struct {
	dec zstdDecoder
	buf []byte
}

// ErrNoDecompressor is the error for a compressed body before
// [Decompressor.Enable].
var ErrNoDecompressor = errors.New("snapshot: compressed datagram but no decompressor")

// Enable makes d decode compressed bodies, with the dictionary the server
// uses (nil for none). The decoder is limited for untrusted input: window
// and memory at MaxBody, output at MaxBody.
func (d *Decompressor) Enable(dict []byte) error {
	dec, err := newZstdDecoder(dict)
	if err != nil {
		return fmt.Errorf("snapshot: zstd decoder: %w", err)
	}
	d.dec = dec
	return nil
}

// Decompress returns the decompressed body of src (valid until the next
// call): an error wrapping wire.ErrCorrupt for a body that does not decode
// or exceeds MaxBody, and one for any compressed body before Enable.
func (d *Decompressor) Decompress(src []byte) ([]byte, error) {
	if d.dec == nil {
		return nil, ErrNoDecompressor
	}
	out, err := d.dec.DecodeAll(src, d.buf[:0])
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", wire.ErrCorrupt, err)
	}
	if len(out) > MaxBody {
		return nil, fmt.Errorf("%w: decompressed body of %d bytes", wire.ErrCorrupt, len(out))
	}
	d.buf = out
	return out, nil
}

// TrainDictionary builds a zstd dictionary from sample datagrams (as Build
// returns them). Use the same dictionary on both sides.
func TrainDictionary(samples [][]byte) ([]byte, error) {
	var hist []byte
	contents := make([][]byte, 0, len(samples))
	for _, s := range samples {
		if len(s) < 2 {
			continue
		}
		contents = append(contents, s[1:])
		if len(hist) < 32<<10 {
			hist = append(hist, s[1:]...)
		}
	}
	if len(contents) == 0 {
		return nil, fmt.Errorf("snapshot: no samples to train a dictionary")
	}
	d, err := buildZstdDict(contents, hist)
	if err != nil && len(contents) >= 2 {
		// Samples the history covers entirely leave the builder no literals
		// to learn from (dense bit-packed datagrams): learn the second half
		// of the samples against a history of the first.
		half := len(contents) / 2
		hist = hist[:0]
		for _, c := range contents[:half] {
			if len(hist) < 32<<10 {
				hist = append(hist, c...)
			}
		}
		d, err = buildZstdDict(contents[half:], hist)
	}
	return d, err
}
