package executor

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// Setup records: what a rank tells each peer about a segment of its own when the
// executor starts (its board) and when it makes a plan context (counters and
// scratch). Little-endian, at most maxRecord bytes, untrusted on receipt:
//
//	magic u32, version u16, kind u16, pid u32, uid u32, boot id [16]byte,
//	context u64, plan hash u64, scratch capacity u64,
//	segment bytes u64, segment address u64, nonce [16]byte, name length u16,
//	0 [6]byte, scratch IPC handle [64]byte (device scratch; zeros for host), name
//
// An ack (kind recordMapped) is the magic, version and kind alone: the peer mapped
// every segment announced to it, so the creator may unlink the files.

const (
	recordMagic   = 0x58455855 // "UXEX"
	recordVersion = 2          // 2: the board holds the barrier word (boardBarriers)
	recordHeader  = 160
	maxRecord     = recordHeader + maxSegmentName
	ackBytes      = 8

	recordBoard   = 1
	recordContext = 2
	recordMapped  = 3

	// The user tags (Communicator's 16 bits) of setup records.
	tagRecord = 0xC001
	tagAck    = 0xC002
)

// record is a decoded setup record.
type record struct {
	kind       uint16
	pid, uid   uint32
	bootID     [16]byte
	context    uint64
	planHash   uint64
	scratchCap uint64
	segBytes   uint64
	segAddr    uint64
	nonce      [16]byte
	handle     [64]byte
	name       string
}

func (r *record) encode() []byte {
	b := make([]byte, recordHeader+len(r.name))
	binary.LittleEndian.PutUint32(b, recordMagic)
	binary.LittleEndian.PutUint16(b[4:], recordVersion)
	binary.LittleEndian.PutUint16(b[6:], r.kind)
	binary.LittleEndian.PutUint32(b[8:], r.pid)
	binary.LittleEndian.PutUint32(b[12:], r.uid)
	copy(b[16:32], r.bootID[:])
	binary.LittleEndian.PutUint64(b[32:], r.context)
	binary.LittleEndian.PutUint64(b[40:], r.planHash)
	binary.LittleEndian.PutUint64(b[48:], r.scratchCap)
	binary.LittleEndian.PutUint64(b[56:], r.segBytes)
	binary.LittleEndian.PutUint64(b[64:], r.segAddr)
	copy(b[72:88], r.nonce[:])
	binary.LittleEndian.PutUint16(b[88:], uint16(len(r.name)))
	copy(b[96:160], r.handle[:])
	copy(b[recordHeader:], r.name)
	return b
}

// decodeRecord reads a record of kind want; untrusted.
func decodeRecord(b []byte, want uint16) (*record, error) {
	if len(b) < recordHeader || binary.LittleEndian.Uint32(b) != recordMagic ||
		binary.LittleEndian.Uint16(b[4:]) != recordVersion || binary.LittleEndian.Uint16(b[6:]) != want {
		return nil, fmt.Errorf("executor: not a setup record of kind %d (%d bytes): %w", want, len(b), ErrPeerProtocol)
	}
	r := &record{kind: want}
	r.pid = binary.LittleEndian.Uint32(b[8:])
	r.uid = binary.LittleEndian.Uint32(b[12:])
	copy(r.bootID[:], b[16:32])
	r.context = binary.LittleEndian.Uint64(b[32:])
	r.planHash = binary.LittleEndian.Uint64(b[40:])
	r.scratchCap = binary.LittleEndian.Uint64(b[48:])
	r.segBytes = binary.LittleEndian.Uint64(b[56:])
	r.segAddr = binary.LittleEndian.Uint64(b[64:])
	copy(r.nonce[:], b[72:88])
	copy(r.handle[:], b[96:160])
	n := int(binary.LittleEndian.Uint16(b[88:]))
	if n != len(b)-recordHeader || n > maxSegmentName || r.pid == 0 || r.pid > 1<<22 || r.segBytes > maxSegmentBytes {
		return nil, fmt.Errorf("executor: setup record with a %d-byte name in %d bytes, pid %d, %d-byte segment: %w",
			n, len(b), r.pid, r.segBytes, ErrPeerProtocol)
	}
	r.name = string(b[recordHeader:])
	return r, nil
}

func encodeAck() []byte {
	b := make([]byte, ackBytes)
	binary.LittleEndian.PutUint32(b, recordMagic)
	binary.LittleEndian.PutUint16(b[4:], recordVersion)
	binary.LittleEndian.PutUint16(b[6:], recordMapped)
	return b
}

func checkAck(b []byte) error {
	if len(b) != ackBytes || binary.LittleEndian.Uint32(b) != recordMagic ||
		binary.LittleEndian.Uint16(b[4:]) != recordVersion || binary.LittleEndian.Uint16(b[6:]) != recordMapped {
		return fmt.Errorf("executor: not a mapped ack: %w", ErrPeerProtocol)
	}
	return nil
}

// maxSegmentBytes bounds a segment a peer announces (and one we make): 16 GiB.
const maxSegmentBytes = 16 << 30

// thisHost identifies the machine this process runs on: the kernel's boot id
// (processes of one host see the same one), or zeros where it cannot be read.
func thisHost() (id [16]byte) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return id
	}
	h, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(b)), "-", ""))
	if err == nil && len(h) == 16 {
		copy(id[:], h)
	}
	return id
}

func newNonce() (n [16]byte) {
	rand.Read(n[:])
	return n
}
