package core

import (
	"encoding/binary"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The block a multi-buffer or active-message receive completes with (its address is
// the completion's Length): a record, then the host frames (messageplan.go lays it
// out). All words little-endian
// u64:
//
//	word 0: frame count n
//	word 1: size of the whole block in bytes
//	words 2+3i, 3+3i, 4+3i: frame i's location, size and memory type word
//
// A host frame's location is its offset in the block; host frames start BlockAlign-
// aligned and never overlap. The block is one C malloc: the consumer frees it with
// free() once it is done with every host frame in it. A host frame the receive's
// FramePolicy.OwnHostFrom covers is not in the block: its location is the address of
// a frame of its own that HostFrame lent, its memory type word MemHost | FrameOwnFlag,
// and the consumer gives it back with ReleaseHostFrame once done with that frame alone
// (hostframecache.go; never free(): the cache keeps it for the next receive). A CUDA frame is not
// in the block: its location is the address of its own device allocation, and its
// memory type word is MemCUDA | device<<FrameDeviceShift, which the consumer frees
// with FreeCUDA. A frame the application allocated (host or CUDA, see frames.go) is
// not in the block either: its memory type word is MemHost or MemCUDA |
// FrameUserFlag, its location the application's address (0 until the application
// provides it), and the consumer frees nothing of it.
//
// blockRecord is the one writer of this record; pybridge generates the Python reader's
// constants from the ones below.
const (
	BlockHeaderSize      = 16      // words 0 and 1
	BlockFrameRecordSize = 24      // one frame's three words
	BlockAlign           = 64      // alignment of host frames in the block
	FrameDeviceShift     = 8       // a CUDA frame's device, in its memory type word
	FrameUserFlag        = 1 << 16 // a frame the application allocated
	FrameOwnFlag         = 1 << 17 // a host frame of its own (HostFrame)
)

// blockRecord is the record at the start of a block, for writing.
type blockRecord []byte

// recordSize is the size of the record of a block of n frames.
func recordSize(n int) uint64 { return BlockHeaderSize + BlockFrameRecordSize*uint64(n) }

// newBlockRecord writes the header of the record of a block of n frames and size bytes
// at block, which has room for recordSize(n) bytes.
func newBlockRecord(block unsafe.Pointer, n int, size uint64) blockRecord {
	r := blockRecord(unsafe.Slice((*byte)(block), recordSize(n)))
	binary.LittleEndian.PutUint64(r[0:], uint64(n))
	binary.LittleEndian.PutUint64(r[8:], size)
	return r
}

// readBlockRecord returns the record at the start of a block.
func readBlockRecord(block unsafe.Pointer) blockRecord {
	n := binary.LittleEndian.Uint64(unsafe.Slice((*byte)(block), BlockHeaderSize))
	return blockRecord(unsafe.Slice((*byte)(block), recordSize(int(n))))
}

// frames is the number of frames the record lists.
func (r blockRecord) frames() int { return int(binary.LittleEndian.Uint64(r)) }

// setFrame writes frame i's location (offset in the block, or a CUDA address), size
// and memory type word.
func (r blockRecord) setFrame(i int, location, size, memType uint64) {
	w := r[BlockHeaderSize+BlockFrameRecordSize*i:]
	binary.LittleEndian.PutUint64(w[0:], location)
	binary.LittleEndian.PutUint64(w[8:], size)
	binary.LittleEndian.PutUint64(w[16:], memType)
}

// frame returns frame i's location, size and memory type word.
func (r blockRecord) frame(i int) (location, size, memType uint64) {
	w := r[BlockHeaderSize+BlockFrameRecordSize*i:]
	return binary.LittleEndian.Uint64(w), binary.LittleEndian.Uint64(w[8:]), binary.LittleEndian.Uint64(w[16:])
}

// cudaFrameType is the memory type word of a CUDA frame the engine allocated on device.
func cudaFrameType(device int) uint64 { return uint64(MemCUDA) | uint64(device)<<FrameDeviceShift }

func alignUp(n uint64) uint64 { return (n + BlockAlign - 1) &^ (BlockAlign - 1) }

// freeReceivedBlock frees a block no application took, with the host and CUDA frames
// the engine allocated for it outside it.
func freeReceivedBlock(block unsafe.Pointer, cuda *cudaGate) {
	rec := readBlockRecord(block)
	var frames []uintptr
	for i := range rec.frames() {
		at, _, t := rec.frame(i)
		switch {
		case t&FrameOwnFlag != 0:
			_ = ReleaseHostFrame(uintptr(at)) // HostFrame lent it
		case t&0xff == uint64(MemCUDA) && t&FrameUserFlag == 0:
			frames = append(frames, uintptr(at))
		}
	}
	if len(frames) > 0 {
		cuda.free(frames)
	}
	ucxx.CFree(block)
}
