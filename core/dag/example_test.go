package dag_test

import (
	"context"
	"fmt"

	"github.com/ucxx-go/ucxx-go/core/dag"
)

// Two halves of one buffer are filled concurrently (disjoint byte ranges), then summed
// by a vertex that reads both and so waits for both.
func ExampleGraph() {
	g, err := dag.New(dag.Options{})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	const buf = dag.ArrayID(1)
	data := make([]byte, 8)
	fill := func(off int, b byte) func() error {
		return func() error {
			for i := off; i < off+4; i++ {
				data[i] = b
			}
			return nil
		}
	}
	g.Add(dag.Task{Name: "low", Accesses: []dag.Access{{Array: buf, Off: 0, Len: 4, Mode: dag.Write}}, Run: fill(0, 1)})
	g.Add(dag.Task{Name: "high", Accesses: []dag.Access{{Array: buf, Off: 4, Len: 4, Mode: dag.Write}}, Run: fill(4, 2)})
	sum := 0
	s, _ := g.Add(dag.Task{Name: "sum", Accesses: []dag.Access{{Array: buf, Off: 0, Len: 8, Mode: dag.Read}}, Run: func() error {
		for _, x := range data {
			sum += int(x)
		}
		return nil
	}})
	if err := s.Wait(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("sum =", sum)
	// Output: sum = 12
}
