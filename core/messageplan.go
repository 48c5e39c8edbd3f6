package core

// messagePlan is where every frame of a received multi-buffer message goes, and what
// the message costs: computed once, when its headers are in (plan), and the one source
// of the block's layout for admission, for the application's frames (frames.go) and
// for the frame receives (multirecv.go).
type messagePlan struct {
	frames []framePlan // in frame order
	// blockSize is the size of the message's block: its record, then its host frames
	// that the engine allocates, each BlockAlign-aligned.
	blockSize uint64
	// footprint is what admission charges: the record and every frame, wherever it
	// lives, each aligned as if in the block.
	footprint uint64
	// byApplication counts the frames the application allocates, engineCUDA the CUDA
	// frames the engine allocates, ownHost the host frames it allocates outside the
	// block.
	byApplication, engineCUDA, ownHost int
}

// framePlan is one frame's place.
type framePlan struct {
	size    uint64
	memType uint8
	home    frameHome
	offset  uint64 // inBlock: the frame's offset in the block
}

// frameHome says who allocates a received frame, and where it lives.
type frameHome uint8

const (
	inBlock       frameHome = iota // a host frame in the message's block
	byApplication                  // allocated by the application (FramePolicy), handed over by ProvideFrames
	engineCUDA                     // a CUDA frame the engine allocates on its device
	ownHost                        // a host frame of its own, HostFrame's (FramePolicy.OwnHostFrom)
)

// plan lays out a message of frames of these sizes and memory types, received under
// policy, reusing p's frame slice.
func (p *messagePlan) plan(sizes []uint64, types []uint8, policy FramePolicy) {
	frames := p.frames[:0]
	*p = messagePlan{}
	record := alignUp(recordSize(len(sizes)))
	p.blockSize, p.footprint = record, record
	for i, size := range sizes {
		f := framePlan{size: size, memType: types[i]}
		switch {
		case policy.provides(size, f.memType):
			f.home = byApplication
			p.byApplication++
		case f.memType == MemHost && policy.owns(size):
			f.home = ownHost
			p.ownHost++
		case f.memType == MemHost:
			f.home, f.offset = inBlock, p.blockSize
			p.blockSize = alignUp(p.blockSize + size)
		default:
			f.home = engineCUDA
			p.engineCUDA++
		}
		p.footprint = alignUp(p.footprint + size)
		frames = append(frames, f)
	}
	p.frames = frames
}

// writeRecord writes the block's record as the frames' places stand: host frames in
// the block at their offsets; the others at user[i], cuda[i] or own[i] in frame order,
// or 0 while not allocated yet (nil slices), each with its memory type word.
func (p *messagePlan) writeRecord(block blockRecord, user, cuda, own []uintptr, cudaType uint64) {
	for i, f := range p.frames {
		switch f.home {
		case inBlock:
			block.setFrame(i, f.offset, f.size, uint64(MemHost))
		case ownHost:
			var at uintptr
			if len(own) > 0 {
				at, own = own[0], own[1:]
			}
			block.setFrame(i, uint64(at), f.size, uint64(MemHost)|FrameOwnFlag)
		case byApplication:
			var at uintptr
			if len(user) > 0 {
				at, user = user[0], user[1:]
			}
			block.setFrame(i, uint64(at), f.size, uint64(f.memType)|FrameUserFlag)
		case engineCUDA:
			var at uintptr
			t := uint64(f.memType)
			if len(cuda) > 0 {
				at, cuda, t = cuda[0], cuda[1:], cudaType
			}
			block.setFrame(i, uint64(at), f.size, t)
		}
	}
}
