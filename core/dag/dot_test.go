package dag

import (
	"strings"
	"testing"
)

func TestWriteDOT(t *testing.T) {
	lane := &manualLane{name: "lane"}
	g := newGraph(t, Options{DOT: true, Execution: Sync})
	a, _ := g.Add(Task{Name: `w "x"`, Lane: lane, Accesses: []Access{acc(1, 0, 8, Write), acc(1, 16, 8, Write)}})
	b, _ := g.Add(Task{Name: "r", Lane: lane, Accesses: []Access{acc(1, 0, 24, Read)}})
	c, _ := g.Add(Task{Name: "other", Lane: lane, Accesses: []Access{acc(2, 0, 4, Write)}})
	lane.endAll()
	_, _, _ = a, b, c

	var out strings.Builder
	if err := g.WriteDOT(&out); err != nil {
		t.Fatal(err)
	}
	dot := out.String()
	for _, want := range []string{
		"digraph dag {",
		`v1 [label="1 host w \"x\"\nlane done"];`,
		`v1 -> v2 [label="A1[0:8) A1[16:24)"];`, // the two ranges that caused the edge
		`v2 -> v3 [label="order", style=dashed];`,
	} {
		if !strings.Contains(dot, want) {
			t.Errorf("DOT lacks %s:\n%s", want, dot)
		}
	}
	if strings.Count(dot, "->") != 2 {
		t.Errorf("want 2 edges:\n%s", dot)
	}

	g2 := newGraph(t, Options{})
	if err := g2.WriteDOT(&out); err == nil {
		t.Error("WriteDOT without Options.DOT succeeded")
	}
}
