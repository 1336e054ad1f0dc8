package snapshot

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// MaxBody bounds a decompressed datagram body: a hostile frame claiming
// more fails instead of allocating.
const MaxBody = 64 << 10

// Compressor compresses snapshot datagram bodies with zstd (fastest level,
// no checksum) and keeps the result only when it is strictly smaller: the
// datagram then carries [FlagCompressed]. An optional dictionary trained on
// sample datagrams ([TrainDictionary]) helps small datagrams; server and
// clients must use the same one. Not safe for concurrent use.
type Compressor struct {
	enc *zstd.Encoder
	buf []byte
	// Tried and Won count datagrams offered and datagrams sent compressed.
	Tried, Won int
}

// NewCompressor returns a compressor; dict may be nil.
func NewCompressor(dict []byte) (*Compressor, error) {
	opts := []zstd.EOption{
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false),
		zstd.WithLowerEncoderMem(true),
	}
	if dict != nil {
		opts = append(opts, zstd.WithEncoderDict(dict))
	}
	enc, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		return nil, fmt.Errorf("snapshot: zstd encoder: %w", err)
	}
	return &Compressor{enc: enc}, nil
}

// compress returns the compressed body, or nil if it does not win.
func (c *Compressor) compress(body []byte) []byte {
	c.Tried++
	c.buf = c.enc.EncodeAll(body, c.buf[:0])
	if len(c.buf) >= len(body) {
		return nil
	}
	c.Won++
	return c.buf
}

// EnableZstd lets the receiver decode compressed datagrams, with the
// dictionary the server uses (nil for none). The decoder is limited for
// untrusted input: window and memory at MaxBody, output at MaxBody.
func (r *Receiver) EnableZstd(dict []byte) error {
	opts := []zstd.DOption{
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(MaxBody),
		zstd.WithDecoderMaxWindow(MaxBody),
	}
	if dict != nil {
		opts = append(opts, zstd.WithDecoderDicts(dict))
	}
	dec, err := zstd.NewReader(nil, opts...)
	if err != nil {
		return fmt.Errorf("snapshot: zstd decoder: %w", err)
	}
	var buf []byte
	r.dec.fn = func(src []byte) ([]byte, error) {
		out, err := dec.DecodeAll(src, buf[:0])
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
		}
		if len(out) > MaxBody {
			return nil, fmt.Errorf("%w: decompressed body of %d bytes", ErrCorrupt, len(out))
		}
		buf = out
		return out, nil
	}
	return nil
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
	d, err := zstd.BuildDict(zstd.BuildDictOptions{ID: 0x41524e31, Contents: contents, History: hist, Level: zstd.SpeedFastest})
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
		d, err = zstd.BuildDict(zstd.BuildDictOptions{ID: 0x41524e31, Contents: contents[half:], History: hist, Level: zstd.SpeedFastest})
	}
	return d, err
}
