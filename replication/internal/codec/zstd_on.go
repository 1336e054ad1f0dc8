//go:build !js || archenet_zstd

package codec

import "github.com/klauspost/compress/zstd"

// ZstdLinked says whether this build can compress and decompress.
const ZstdLinked = true

func newZstdEncoder(dict []byte) (zstdEncoder, error) {
	opts := []zstd.EOption{
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false),
		zstd.WithLowerEncoderMem(true),
	}
	if dict != nil {
		opts = append(opts, zstd.WithEncoderDict(dict))
	}
	return zstd.NewWriter(nil, opts...)
}

// newZstdDecoder is limited for untrusted input: window and memory at
// MaxBody.
func newZstdDecoder(dict []byte) (zstdDecoder, error) {
	opts := []zstd.DOption{
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(MaxBody),
		zstd.WithDecoderMaxWindow(MaxBody),
	}
	if dict != nil {
		opts = append(opts, zstd.WithDecoderDicts(dict))
	}
	return zstd.NewReader(nil, opts...)
}

func buildZstdDict(contents [][]byte, hist []byte) ([]byte, error) {
	return zstd.BuildDict(zstd.BuildDictOptions{ID: 0x41524e31, Contents: contents, History: hist, Level: zstd.SpeedFastest})
}
