package dag

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// dotRecord is the history Options.DOT keeps: every vertex, and every edge with the
// byte ranges that caused it.
type dotRecord struct {
	vertices []*Vertex
	edges    []dotEdge
}

type dotEdge struct {
	from, to VertexID
	label    string // "A1[0:64) A2[8:16)", or "order" for a Sync ordering edge
	order    bool
}

// add records v, added with deps (the interval maps' findings, in the order found)
// and the Sync policy's ordering parent, if any.
func (r *dotRecord) add(v *Vertex, deps []dep, order *Vertex) {
	r.vertices = append(r.vertices, v)
	var seen []*Vertex
	for _, d := range deps {
		if !containsVertex(seen, d.parent) {
			seen = append(seen, d.parent)
		}
	}
	for _, p := range seen {
		var b strings.Builder
		var last *dep
		for i := range deps {
			d := &deps[i]
			if d.parent != p {
				continue
			}
			if last != nil && last.array == d.array && last.hi == d.lo {
				last.hi = d.hi // merge contiguous pieces (deps is scratch, ours to change)
				continue
			}
			if last != nil {
				fmt.Fprintf(&b, "A%d[%d:%d) ", last.array, last.lo, last.hi)
			}
			last = d
		}
		fmt.Fprintf(&b, "A%d[%d:%d)", last.array, last.lo, last.hi)
		r.edges = append(r.edges, dotEdge{from: p.id, to: v.id, label: b.String()})
	}
	if order != nil {
		r.edges = append(r.edges, dotEdge{from: order.id, to: v.id, label: "order", order: true})
	}
}

func containsVertex(vs []*Vertex, v *Vertex) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// errNoDOT is WriteDOT's error for a graph made without Options.DOT.
var errNoDOT = errors.New("dag: WriteDOT needs Options.DOT")

// WriteDOT writes every vertex added so far and the edges between them as a Graphviz
// DOT digraph: each vertex labelled with its id, kind, name, lane (and stream) and
// current state; each edge with the byte ranges that caused it ("order" and dashed for
// the Sync policy's ordering edges).
//
// Errors: the graph was made without Options.DOT; w's write error.
func (g *Graph) WriteDOT(w io.Writer) error {
	if g.dot == nil {
		return errNoDOT
	}
	g.mu.Lock()
	vertices := append([]*Vertex(nil), g.dot.vertices...)
	edges := append([]dotEdge(nil), g.dot.edges...)
	g.mu.Unlock()

	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "digraph dag {")
	fmt.Fprintln(bw, "  node [shape=box, fontname=monospace];")
	for _, v := range vertices {
		label := fmt.Sprintf("%d %v", v.id, v.kind)
		if v.name != "" {
			label += " " + v.name
		}
		place := v.lane.Name()
		if s, ok := v.Stream(); ok {
			place = s.String()
		}
		label += "\n" + place + " " + v.State().String()
		fmt.Fprintf(bw, "  v%d [label=%s%s];\n", v.id, dotQuote(label), stateStyle(v.State()))
	}
	for _, e := range edges {
		style := ""
		if e.order {
			style = ", style=dashed"
		}
		fmt.Fprintf(bw, "  v%d -> v%d [label=%s%s];\n", e.from, e.to, dotQuote(e.label), style)
	}
	fmt.Fprintln(bw, "}")
	return bw.Flush()
}

// dotQuote quotes s as a DOT string, newlines as \n.
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func stateStyle(s State) string {
	switch s {
	case Failed:
		return ", color=red"
	case Running:
		return ", color=blue"
	case Pending:
		return ", color=gray"
	}
	return ""
}
