//go:build js && !archenet_zstd

package codec

import "errors"

// ZstdLinked says whether this build can compress and decompress.
const ZstdLinked = false

// ErrNoZstd is what a page built without the archenet_zstd tag gets for
// anything zstd.
var ErrNoZstd = errors.New("this page was built without zstd (go build -tags archenet_zstd adds it)")

func newZstdEncoder([]byte) (zstdEncoder, error) { return nil, ErrNoZstd }

func newZstdDecoder([]byte) (zstdDecoder, error) { return nil, ErrNoZstd }

func buildZstdDict([][]byte, []byte) ([]byte, error) { return nil, ErrNoZstd }
