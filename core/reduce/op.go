package reduce

import "strconv"

// Op is a reduction's element-wise operation. The numbering is core/execution's
// ReduceOp.
type Op uint8

// The operations.
const (
	Sum Op = iota + 1
	Prod
	Min
	Max
)

var opNames = [...]string{Sum: "sum", Prod: "prod", Min: "min", Max: "max"}

// String is the operation's name ("sum", "prod", "min", "max"), or "Op(n)".
func (op Op) String() string {
	if int(op) < len(opNames) && opNames[op] != "" {
		return opNames[op]
	}
	return "Op(" + strconv.Itoa(int(op)) + ")"
}

// ParseOp returns the operation String names s, and whether there is one.
func ParseOp(s string) (Op, bool) {
	for op, name := range opNames {
		if name != "" && name == s {
			return Op(op), true
		}
	}
	return 0, false
}
