package wire

import (
	"encoding/binary"
	"fmt"
)

// MaxEndedKeys bounds the keys of one spawns-ended message (a client holds
// at most ServerConfig.Limits.MaxPredictedSpawns keyed entities, ≤ 1024 in
// practice; more is malformed).
const MaxEndedKeys = 4096

// AppendSpawnsEnded appends the message telling a client that the server
// removed the entities it keyed with keys (Server.PredictedSpawn) before
// they were ever sent:
//
//	0x12 | count uvarint (1..MaxEndedKeys) | count × key u32 LE
func AppendSpawnsEnded(b []byte, keys []uint32) []byte {
	b = append(b, KindSpawnsEnded)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint32(b, k)
	}
	return b
}

// SpawnsEndedLen returns the length of the message for n keys.
func SpawnsEndedLen(n int) int { return 1 + uvarintLen(uint64(n)) + 4*n }

// ParseSpawnsEnded decodes a spawns-ended message, calling fn per key (after
// checking the whole message).
func ParseSpawnsEnded(b []byte, fn func(key uint32)) error {
	if len(b) < 2 || b[0] != KindSpawnsEnded {
		return fmt.Errorf("%w: spawns-ended message of %d bytes", ErrMalformed, len(b))
	}
	n, used := minimalUvarint(b[1:])
	if used <= 0 || n == 0 || n > MaxEndedKeys || uint64(len(b)-1-used) != 4*n {
		return fmt.Errorf("%w: spawns-ended message: %d keys in %d bytes", ErrMalformed, n, len(b))
	}
	for rest := b[1+used:]; len(rest) >= 4; rest = rest[4:] {
		fn(binary.LittleEndian.Uint32(rest))
	}
	return nil
}
