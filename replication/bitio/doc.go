// Package bitio reads and writes bit-packed streams: fixed-width fields up to
// 64 bits, variable-length integers, zigzag-coded signed values and bools.
//
// # Bit order
//
// A stream is a little-endian bit string: the first bit written is the least
// significant bit of byte 0, and an n-bit field is stored least significant
// bit first. Multi-byte words are assembled with explicit little-endian byte
// order (never a native memory copy) and floats never reach this package, so
// the same calls produce the same bytes on every platform.
//
// # Outline
//
//   - [Writer]: append-style, reusable ([Writer.Reset]); [Writer.WriteBits],
//     [Writer.WriteBool], [Writer.WriteUvarint], [Writer.WriteVarint],
//     [Writer.WriteExpGolomb], [Writer.WriteRice],
//     [Writer.AppendBits], [Writer.Align], [Writer.Truncate], [Writer.Bytes].
//     Allocation-free once its buffer has grown. [Writer.PutBits] is
//     WriteBits without its checks, for hot loops (it inlines), with
//     [RiceCode] and [ExpGolombCode] giving whole codes as one field.
//   - [Reader]: fail-closed; the matching Read methods, a sticky [Reader.Err]
//     ([ErrShortBuffer], [ErrOverflow]) and zero values after any failure.
//     Every loop is bounded; a Reader never panics and never allocates.
//   - [ZigZag], [UnZigZag]: signed ↔ unsigned mapping for small magnitudes.
//
// # Task index
//
//   - Pack a quantized value of known width: [Writer.WriteBits] / [Reader.ReadBits].
//   - Pack a small signed residual: [Writer.WriteExpGolomb] of [ZigZag].
//   - Splice a pre-encoded record into a packet: [Writer.AppendBits].
//   - Take back what was written since a position: [Writer.Truncate]; read
//     it back as one field (up to 56 bits): [Writer.Tail].
package bitio
