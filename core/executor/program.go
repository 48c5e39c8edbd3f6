package executor

//go:generate go test -run TestProgramFormatHeader -update .

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/reduce"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Device programs: a GPU lane's ops run by one kernel launch. Queued one driver call
// each, a call's copies, reductions, signals and waits cost 3-5 µs of host time
// apiece, which set a small call's time (RESULTS.md, "Where a 2-GPU small
// allreduce's host time goes"). For calls of at most programMaxBytes a lane records
// them instead, in the same order and with the same addresses, into a program, and
// launches it as one kernel when it must (before the host waits, when the lane ends,
// when the program is full): one thread block runs the ops in order
// (kernels/program.cu) with the stream's semantics: each op starts after the one
// before it ended; a write of a word (a signal) comes after every earlier op's stores
// are visible to every device and the host; an op after a wait sees what was written
// before the word reached its value. A sliced call's programs run on several blocks,
// each so on its own slice of every op (slices.go).
//
// A waits-only call (Call.ProgramWaits) records only its signals and waits: its
// copies go to the copy engines and its reductions to the reduction kernels, queued
// between the programs that hold them, and a wait spins in its program until its
// word arrives, so the op after it starts within µs of the signal.
//
// Device waits spin in the block, as cuStreamWaitValue64 holds its stream: where
// ranks share a GPU the lanes wait on the host instead (hostWaits), and programs
// hold no waits.
//
// The layout is defined here and nowhere else: kernels/program_format.h is generated
// from these constants (go generate ./core/executor), and TestProgramFormatHeader
// fails when it is stale. A program is programWords 64-bit words: the first holds
// the count of words used after it; then ops, each a first word holding its code in
// the low 32 bits, and its operands, one word each, in the order programOperands
// gives.

// Program op codes.
const (
	programCopy   = 1 // dst, src, bytes: copy bytes from src to dst (local or peer memory)
	programReduce = 2 // dst, a, b, elements: dst[i] = a[i] op b[i] in the kernel's type and operator
	programWrite  = 3 // address, value: store value into the 64-bit word (a signal)
	programWait   = 4 // address, value: wait until the 64-bit word is at least value
)

// programOperands is each op's operand count.
var programOperands = [...]int{programCopy: 3, programReduce: 4, programWrite: 2, programWait: 2}

const (
	// programWords is a program's size in words, its count's included: 3,584 bytes,
	// passed by value as the kernel's parameter (inside ucxx.MaxPackedParams).
	programWords = 448
	// programThreads is the block a program runs on.
	programThreads = 512
	// defaultProgramMaxBytes: calls whose send and receive buffers are both at most
	// this size run their GPU lanes as programs. Measured on 2 x H100, per call (3
	// interleaved rounds, RESULTS.md, session 18): programs 10-40 µs faster than one
	// driver call an op for every collective to 32 KiB; from 128 KiB one block's
	// copies cost more than the driver calls they save (a 512 KiB allreduce 141
	// against 91 µs; 2-16 blocks did no better: 113 against 69).
	defaultProgramMaxBytes = 64 << 10
)

var (
	// programMaxBytes is defaultProgramMaxBytes, or UCXGO_PROGRAM_MAX_BYTES (a tuning
	// knob for measuring the threshold).
	programMaxBytes = envBytes("UCXGO_PROGRAM_MAX_BYTES", defaultProgramMaxBytes)
	// programOpMaxBytes: a copy or reduction larger than this is queued as before
	// (a copy engine's copy, the multi-block reduction kernel) between programs, in
	// case a plan moves more than its call's buffers hold; programMaxBytes, or
	// UCXGO_PROGRAM_OP_MAX_BYTES.
	programOpMaxBytes = envBytes("UCXGO_PROGRAM_OP_MAX_BYTES", programMaxBytes)
	// programWaitsMinBytes, from UCXGO_PROGRAM_WAITS_MIN_BYTES: every device call at
	// least this large that is neither sliced nor run whole as programs records only
	// its signals and waits (Call.ProgramWaits), asked or not; for tests and
	// measuring.
	programWaitsMinBytes = envBytes("UCXGO_PROGRAM_WAITS_MIN_BYTES", math.MaxUint64)
)

// envBytes is the environment variable name's value as a byte count, else def (unset,
// not a number, or negative).
func envBytes(name string, def uint64) uint64 {
	if n, err := strconv.ParseUint(os.Getenv(name), 10, 64); err == nil {
		return n
	}
	return def
}

// devicePrograms turns device programs on (UCXGO_DEVICE_PROGRAMS=0 turns them off:
// every op is then a driver call of its own, as before them).
var devicePrograms = os.Getenv("UCXGO_DEVICE_PROGRAMS") != "0"

// deviceProgram is one launch's worth of a lane's recorded ops.
type deviceProgram struct {
	words [programWords]uint64
	// reduces: the program holds a reduction of type t and operator op, which pick
	// its kernel; a program without one runs program_copy.
	reduces bool
	t       reduce.DType
	op      reduce.Op
}

// used returns the words the program's ops take.
func (p *deviceProgram) used() int { return int(p.words[0]) }

func (p *deviceProgram) reset() {
	p.words[0] = 0
	p.reduces = false
}

// add appends an op; false when the program has no room for it.
func (p *deviceProgram) add(code uint64, operands ...uint64) bool {
	n := p.used()
	if 1+n+1+len(operands) > programWords {
		return false
	}
	p.words[1+n] = code
	copy(p.words[2+n:], operands)
	p.words[0] = uint64(n + 1 + len(operands))
	return true
}

// addReduce appends a reduction; false when the program has no room for it, or holds
// one of another type or operator.
func (p *deviceProgram) addReduce(dst, a, b uintptr, elements uint64, t reduce.DType, op reduce.Op) bool {
	if p.reduces && (p.t != t || p.op != op) {
		return false
	}
	if !p.add(programReduce, uint64(dst), uint64(a), uint64(b), elements) {
		return false
	}
	p.reduces, p.t, p.op = true, t, op
	return true
}

// params is the program as the kernel's parameter.
func (p *deviceProgram) params() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&p.words[0])), programWords*8)
}

// recordCopy records a copy into the lane's program; a large copy, or any in a
// waits-only call, is queued on the stream after the program, but for a sliced
// call's, whose programs run every op.
func (lr *laneRun) recordCopy(dst, src uintptr, n uint64) error {
	if (n > programOpMaxBytes || lr.r.cuda.waitsOnly) && lr.r.cuda.slices == 0 {
		if err := lr.launchProgram(); err != nil {
			return err
		}
		return lr.r.x.gpu.d.CopyAsync(dst, src, n, lr.stream)
	}
	return lr.record(func() bool { return lr.prog.add(programCopy, uint64(dst), uint64(src), n) })
}

// recordWordOp records a signal or a device wait into the lane's program.
func (lr *laneRun) recordWordOp(op ucxx.StreamWordOp) error {
	code := uint64(programWrite)
	if op.Wait {
		code = programWait
	}
	return lr.record(func() bool { return lr.prog.add(code, uint64(op.Addr), op.Value) })
}

// recordReduce records dst = a op b over n elements into the lane's program; it
// reports false, having launched what the program held, for a reduction too large
// for one or in a waits-only call (the caller launches the reduction kernel), but
// in a sliced call.
func (lr *laneRun) recordReduce(dst, a, b uintptr, n uint64, t reduce.DType, op reduce.Op) (bool, error) {
	if (n*t.Size() > programOpMaxBytes || lr.r.cuda.waitsOnly) && lr.r.cuda.slices == 0 {
		return false, lr.launchProgram()
	}
	if !lr.prog.reduces {
		// The program's kernel does its reductions: known to exist before any is
		// recorded (one look a program).
		if _, err := lr.r.x.gpu.programKernel(t, op, true); err != nil {
			return true, err
		}
	}
	return true, lr.record(func() bool { return lr.prog.addReduce(dst, a, b, n, t, op) })
}

// record appends an op with add, launching what the program holds first when add
// finds no room for it (a program is empty after a launch: the op then fits).
func (lr *laneRun) record(add func() bool) error {
	if add() {
		return nil
	}
	if err := lr.launchProgram(); err != nil {
		return err
	}
	add()
	return nil
}

// launchProgram queues what the lane's program holds on its stream, as one kernel,
// and empties it.
func (lr *laneRun) launchProgram() error {
	p := lr.prog
	if p == nil || p.used() == 0 {
		return nil
	}
	f, err := lr.r.x.gpu.programKernel(p.t, p.op, p.reduces)
	if err != nil {
		return err
	}
	blocks := uint32(max(lr.r.cuda.slices, 1))
	err = f.LaunchPacked(ucxx.LaunchShape{Grid: [3]uint32{blocks, 1, 1}, Block: [3]uint32{programThreads, 1, 1}}, lr.stream, p.params())
	if err != nil {
		// The ops launched are the ones recorded since the last launch, not only the
		// one whose recording launched them.
		err = fmt.Errorf("launching a device program of %d words: %w", p.used(), err)
	}
	p.reset()
	return err
}

// programKernel returns the program kernel of a type and operator, or, without
// reduces, the one that runs programs without reductions.
func (g *gpuState) programKernel(t reduce.DType, op reduce.Op, reduces bool) (ucxx.CUDAFunction, error) {
	k := [2]uint8{uint8(t), uint8(op)}
	if !reduces {
		k = [2]uint8{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.programFns[k]; ok {
		return f, nil
	}
	name := "program_copy"
	if reduces {
		tn, ok := typeNames[t]
		if !ok || op < reduce.Sum || op > reduce.Max {
			return ucxx.CUDAFunction{}, fmt.Errorf("executor: reduce %v over %v on a GPU: %w", op, t, ErrUnsupported)
		}
		name = fmt.Sprintf("program_%s_%s", op, tn)
	}
	if g.programMod == (ucxx.CUDAModule{}) {
		return ucxx.CUDAFunction{}, fmt.Errorf("executor: the program kernels are not loaded (UCXGO_DEVICE_PROGRAMS=0): %w", ErrUnsupported)
	}
	f, err := g.programMod.Function(name)
	if err != nil {
		return ucxx.CUDAFunction{}, err
	}
	g.programFns[k] = f
	return f, nil
}

// programFormatHeader renders kernels/program_format.h from the constants above and
// reduceMaxSources (gpu.go).
func programFormatHeader() string {
	var b strings.Builder
	b.WriteString("// Code generated by core/executor's TestProgramFormatHeader from program.go; DO NOT EDIT.\n")
	b.WriteString("// The device program's layout, and the reduction kernels' sources (go generate ./core/executor rewrites this file).\n")
	b.WriteString("#ifndef UCXX_PROGRAM_FORMAT_H\n#define UCXX_PROGRAM_FORMAT_H\n\n")
	for _, c := range []struct {
		name  string
		value int
	}{
		{"PROGRAM_WORDS", programWords},
		{"PROGRAM_THREADS", programThreads},
		{"PROGRAM_COPY", programCopy},
		{"PROGRAM_REDUCE", programReduce},
		{"PROGRAM_WRITE", programWrite},
		{"PROGRAM_WAIT", programWait},
		{"PROGRAM_COPY_OPERANDS", programOperands[programCopy]},
		{"PROGRAM_REDUCE_OPERANDS", programOperands[programReduce]},
		{"PROGRAM_WRITE_OPERANDS", programOperands[programWrite]},
		{"PROGRAM_WAIT_OPERANDS", programOperands[programWait]},
		{"PROGRAM_SLICE_ALIGN", sliceAlign},
		{"PROGRAM_SLICE_WORD_BYTES", sliceWordBytes},
		{"REDUCE_MAX_SOURCES", reduceMaxSources},
	} {
		fmt.Fprintf(&b, "#define %s %d\n", c.name, c.value)
	}
	b.WriteString("\n#endif\n")
	return b.String()
}
