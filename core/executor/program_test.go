package executor

import (
	"flag"
	"os"
	"regexp"
	"testing"

	"github.com/ucxx-go/ucxx-go/core/reduce"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

var update = flag.Bool("update", false, "rewrite kernels/program_format.h from program.go")

const programFormatPath = "kernels/program_format.h"

// The kernels read programs with the layout of kernels/program_format.h: it must be
// what program.go's constants say, or a kernel reads operands as op codes.
func TestProgramFormatHeader(t *testing.T) {
	want := programFormatHeader()
	if *update {
		if err := os.WriteFile(programFormatPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(programFormatPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is stale: run go generate ./core/executor (go test -run TestProgramFormatHeader -update ./core/executor)", programFormatPath)
	}
}

// The checked-in PTX holds a kernel for every type and operator a program may
// reduce in, and program_copy: a missing one would fail calls only on a GPU.
func TestProgramPTXHasEveryKernel(t *testing.T) {
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`\.entry (program_\w+)\(`).FindAllSubmatch(programPTX, -1) {
		names[string(m[1])] = true
	}
	want := []string{"program_copy"}
	for _, tn := range typeNames {
		for _, op := range []reduce.Op{reduce.Sum, reduce.Prod, reduce.Min, reduce.Max} {
			want = append(want, "program_"+op.String()+"_"+tn)
		}
	}
	for _, n := range want {
		if !names[n] {
			t.Errorf("kernels/program.ptx has no %s", n)
		}
	}
	if len(names) != len(want) {
		t.Errorf("kernels/program.ptx has %d program kernels, want %d", len(names), len(want))
	}
}

// decodeProgram reads a program back as the kernel does: the ops' codes and operands.
func decodeProgram(t *testing.T, p *deviceProgram) [][]uint64 {
	t.Helper()
	var ops [][]uint64
	end := 1 + int(p.words[0])
	for i := 1; i < end; {
		code := p.words[i] & 0xffffffff
		if code == 0 || int(code) >= len(programOperands) || programOperands[code] == 0 {
			t.Fatalf("word %d: op code %d", i, code)
		}
		n := programOperands[code]
		ops = append(ops, append([]uint64{code}, p.words[i+1:i+1+n]...))
		i += 1 + n
	}
	return ops
}

func TestDeviceProgramRecordsInOrder(t *testing.T) {
	var p deviceProgram
	if !p.add(programCopy, 0x1000, 0x2000, 64) || !p.addReduce(0x3000, 0x3000, 0x4000, 16, reduce.Float32, reduce.Sum) ||
		!p.add(programWrite, 0x5000, 7) || !p.add(programWait, 0x6000, 9) {
		t.Fatal("a small program did not fit")
	}
	got := decodeProgram(t, &p)
	want := [][]uint64{{programCopy, 0x1000, 0x2000, 64}, {programReduce, 0x3000, 0x3000, 0x4000, 16}, {programWrite, 0x5000, 7}, {programWait, 0x6000, 9}}
	if len(got) != len(want) {
		t.Fatalf("%d ops, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("op %d: %v, want %v", i, got[i], want[i])
			}
		}
	}
	if !p.reduces || p.t != reduce.Float32 || p.op != reduce.Sum {
		t.Fatalf("the program's reduction: %v %v %v", p.reduces, p.t, p.op)
	}
	// A reduction of another operator goes to the next program.
	if p.addReduce(0x3000, 0x3000, 0x4000, 16, reduce.Float32, reduce.Max) {
		t.Fatal("a program took reductions of two operators")
	}
	if len(p.params()) != programWords*8 || programWords*8 > ucxx.MaxPackedParams {
		t.Fatalf("a program's parameter is %d bytes (limit %d)", len(p.params()), ucxx.MaxPackedParams)
	}
	p.reset()
	if p.used() != 0 || p.reduces {
		t.Fatal("reset left ops")
	}
}

func TestDeviceProgramFillsUp(t *testing.T) {
	var p deviceProgram
	n := 0
	for p.add(programWrite, uint64(n), uint64(n)) {
		n++
	}
	if want := (programWords - 1) / (1 + programOperands[programWrite]); n != want {
		t.Fatalf("%d writes fit, want %d", n, want)
	}
	ops := decodeProgram(t, &p)
	if len(ops) != n || ops[n-1][1] != uint64(n-1) {
		t.Fatalf("decoded %d ops, last %v", len(ops), ops[len(ops)-1])
	}
}

// TestEnvBytes: a byte count from the environment, the default where it is unset
// or not a count.
func TestEnvBytes(t *testing.T) {
	const name = "UCXGO_TEST_ENV_BYTES"
	for _, tc := range []struct {
		value string
		want  uint64
	}{{"", 7}, {"0", 0}, {"1048576", 1 << 20}, {"-1", 7}, {"1M", 7}} {
		t.Setenv(name, tc.value)
		if got := envBytes(name, 7); got != tc.want {
			t.Errorf("%s=%q: %d, want %d", name, tc.value, got, tc.want)
		}
	}
}
