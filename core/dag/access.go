package dag

import (
	"fmt"
	"math"
)

// ArrayID names an array whose bytes vertices access. The caller chooses the ids: two
// accesses touch the same memory only when they name the same ArrayID and their byte
// ranges overlap. An id may be reused once no active vertex accesses the array.
type ArrayID uint64

// Mode is how a vertex uses the bytes of an Access.
type Mode uint8

const (
	// Read: the vertex only reads the range. Reads do not wait for each other under
	// the WithConst dependency policy.
	Read Mode = iota + 1
	// Write: the vertex writes the range (and may read what it wrote).
	Write
	// ReadWrite: the vertex reads then writes the range. For dependencies it is a
	// Write.
	ReadWrite
	// Reduce: the vertex adds a commutative contribution to the range (an atomic
	// add, a max...). Reductions into a range do not wait for each other, but they wait
	// for earlier reads and writes of it, and later reads and writes wait for all of
	// them. The work itself must combine concurrent contributions safely (atomics, or a
	// lock of its own): the graph does not serialize them.
	Reduce
)

// String returns the mode's short name: "r", "w", "rw" or "reduce".
func (m Mode) String() string {
	switch m {
	case Read:
		return "r"
	case Write:
		return "w"
	case ReadWrite:
		return "rw"
	case Reduce:
		return "reduce"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// reads reports whether the mode needs the bytes that are there before the vertex
// runs (every mode but Write).
func (m Mode) reads() bool { return m != Write }

// Access is one byte range of one array and how a vertex uses it: the bytes
// [Off, Off+Len) of Array. An access of length 0 touches nothing.
type Access struct {
	Array ArrayID
	Off   uint64
	Len   uint64
	Mode  Mode
}

// End returns the offset just past the range, Off+Len.
func (a Access) End() uint64 { return a.Off + a.Len }

// String formats the access as "A3[0:64) rw".
func (a Access) String() string {
	return fmt.Sprintf("A%d[%d:%d) %s", a.Array, a.Off, a.End(), a.Mode)
}

// validate reports a malformed access: an unknown mode or a range past 2^64.
func (a Access) validate() error {
	if a.Mode < Read || a.Mode > Reduce {
		return fmt.Errorf("dag: access %v: unknown mode", a)
	}
	if a.Len > math.MaxUint64-a.Off {
		return fmt.Errorf("dag: access to A%d at %d: length %d overflows", a.Array, a.Off, a.Len)
	}
	return nil
}

// DependencyPolicy says which pairs of accesses to overlapping bytes are ordered.
type DependencyPolicy uint8

const (
	// WithConst orders every pair except read after read and reduce after reduce:
	// read-only inputs are shared. The default, and GrCUDA's "with-const".
	WithConst DependencyPolicy = iota
	// NoConst treats every access as a write: every pair of accesses to a byte is
	// ordered. GrCUDA's default ("no-const"), for code whose read-only arguments are
	// not declared as such.
	NoConst
)

// String returns the policy's GrCUDA name, "with-const" or "no-const".
func (p DependencyPolicy) String() string {
	switch p {
	case WithConst:
		return "with-const"
	case NoConst:
		return "no-const"
	}
	return fmt.Sprintf("DependencyPolicy(%d)", uint8(p))
}

// ParseDependencyPolicy parses the names String returns.
func ParseDependencyPolicy(s string) (DependencyPolicy, error) {
	for p := WithConst; p <= NoConst; p++ {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("dag: unknown dependency policy %q", s)
}

// depMode returns the mode an access has for dependencies: Read, Write or Reduce.
func (p DependencyPolicy) depMode(m Mode) Mode {
	if p == NoConst || m == ReadWrite {
		return Write
	}
	return m
}

// conflicts reports whether two accesses to one byte, in modes a then b, must be
// ordered under policy p. The interval maps implement this rule; tests check them
// against it.
func (p DependencyPolicy) conflicts(a, b Mode) bool {
	a, b = p.depMode(a), p.depMode(b)
	return !(a == Read && b == Read) && !(a == Reduce && b == Reduce)
}

// normalizeAccesses copies the caller's accesses, leaving out empty ones, and puts
// the Reduce accesses first. A vertex's accesses happen together, but the interval map
// takes them one at a time: a vertex that reads bytes it also reduces into must hold
// them exclusively, and taking its reduction before its read makes the read wait for
// the other reducers (and later reducers wait for the read), which taking them in the
// other order would not.
func normalizeAccesses(in []Access) []Access {
	out := make([]Access, 0, len(in))
	for _, a := range in {
		if a.Len > 0 && a.Mode == Reduce {
			out = append(out, a)
		}
	}
	for _, a := range in {
		if a.Len > 0 && a.Mode != Reduce {
			out = append(out, a)
		}
	}
	return out
}
