package core

import (
	"encoding/binary"
)

// A packed key is what one side gives its peer so that the peer may read and write a
// range of its registered memory (a region) or signal one of its semaphores. It is
// opaque to the application and to Python; this file is its one writer and one
// reader. All words little-endian:
//
//	bytes 0-3:   magic "UXK1"
//	byte  4:     kind (keyRegion or keySemaphore)
//	byte  5:     memory type (MemHost or MemCUDA)
//	bytes 6-7:   zero
//	bytes 8-15:  address of the range in the owner's address space
//	bytes 16-23: length of the range in bytes
//	bytes 24-27: length n of UCX's packed remote key
//	bytes 28-31: zero
//	bytes 32-:   UCX's packed remote key, n bytes, and nothing after it
//
// A packed key from a peer is untrusted: parsePackedKey checks every field and
// length, and the range bounds every operation on it.
const (
	packedKeyMagic  = "UXK1"
	packedKeyHeader = 32
	// MaxPackedKey bounds a packed key: UCX's keys for host and CUDA memory take a
	// few hundred bytes.
	MaxPackedKey = 8 << 10
)

// keyKind says what a packed key names.
type keyKind uint8

const (
	keyRegion    keyKind = 1
	keySemaphore keyKind = 2
)

// packedKey is a packed key's fields.
type packedKey struct {
	kind    keyKind
	memType uint8
	addr    uint64
	length  uint64
	rkey    []byte // UCX's packed remote key
}

// appendPackedKey appends k in the packed format to dst.
func appendPackedKey(dst []byte, k packedKey) []byte {
	var h [packedKeyHeader]byte
	copy(h[:], packedKeyMagic)
	h[4], h[5] = byte(k.kind), k.memType
	binary.LittleEndian.PutUint64(h[8:], k.addr)
	binary.LittleEndian.PutUint64(h[16:], k.length)
	binary.LittleEndian.PutUint32(h[24:], uint32(len(k.rkey)))
	return append(append(dst, h[:]...), k.rkey...)
}

// parsePackedKey reads a packed key from a peer, checking that it is well formed:
// magic, a known kind and memory type, zero padding, a range that does not wrap, a
// semaphore of one aligned 8-byte word, and a remote key that fills the rest exactly.
// rkey aliases b.
func parsePackedKey(b []byte) (packedKey, error) {
	if len(b) < packedKeyHeader || len(b) > MaxPackedKey || string(b[:4]) != packedKeyMagic {
		return packedKey{}, ErrBadKey
	}
	k := packedKey{
		kind:    keyKind(b[4]),
		memType: b[5],
		addr:    binary.LittleEndian.Uint64(b[8:]),
		length:  binary.LittleEndian.Uint64(b[16:]),
	}
	n := binary.LittleEndian.Uint32(b[24:])
	switch {
	case k.kind != keyRegion && k.kind != keySemaphore,
		k.memType != MemHost && k.memType != MemCUDA,
		b[6] != 0 || b[7] != 0 || binary.LittleEndian.Uint32(b[28:]) != 0,
		k.addr+k.length < k.addr,
		k.kind == keySemaphore && (k.length != 8 || k.addr%8 != 0 || k.memType != MemHost),
		n == 0 || uint64(n) != uint64(len(b)-packedKeyHeader):
		return packedKey{}, ErrBadKey
	}
	k.rkey = b[packedKeyHeader:]
	return k, nil
}
