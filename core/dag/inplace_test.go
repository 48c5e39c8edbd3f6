package dag

import (
	"fmt"
	"slices"
	"testing"
)

// TestRecordInPlace: work that writes in place leaves its Write ranges where the
// model had them; its reads add its location and its ReadWrite ranges move to it, as
// Record's do. Record moves the same Write range.
func TestRecordInPlace(t *testing.T) {
	holders := func(loc *LocationTracker, array ArrayID) []string {
		var got []string
		loc.Holders(array, 0, 100, func(off, n uint64, s LocationSet) { got = append(got, fmt.Sprintf("%d+%d%v", off, n, s)) })
		return got
	}
	loc := NewLocationTracker()
	loc.Place(1, 0, 100, 0)
	loc.Place(2, 0, 100, 0)
	loc.Place(3, 0, 100, 0)
	loc.RecordInPlace([]Access{acc(1, 0, 50, Write), acc(2, 0, 100, Read), acc(3, 0, 100, ReadWrite)}, 1)
	for _, c := range []struct {
		array ArrayID
		want  []string
	}{
		{1, []string{"0+100{gpu0}"}},
		{2, []string{"0+100{gpu0,gpu1}"}},
		{3, []string{"0+100{gpu1}"}},
	} {
		if got := holders(loc, c.array); !slices.Equal(got, c.want) {
			t.Errorf("array %d after work in place on gpu1: %v, want %v", c.array, got, c.want)
		}
	}
	loc.Record([]Access{acc(1, 0, 50, Write)}, 1)
	if got, want := holders(loc, 1), []string{"0+50{gpu1}", "50+50{gpu0}"}; !slices.Equal(got, want) {
		t.Errorf("array 1 after a write recorded as moving it: %v, want %v", got, want)
	}
}

// TestWritesInPlaceKeepReadersHome: a copy on GPU 1 into a range that lives on GPU 0,
// written in place (a mapping), leaves the range on GPU 0: the next kernel reading it
// goes to GPU 0 and moves nothing. Without WritesInPlace the model has the range on
// GPU 1 after the copy, and the reader follows it there.
func TestWritesInPlaceKeepReadersHome(t *testing.T) {
	for _, inPlace := range []bool{true, false} {
		t.Run(fmt.Sprint("in place ", inPlace), func(t *testing.T) {
			lanes := []Lane{&manualLane{name: "gpu0"}, &manualLane{name: "gpu1"}}
			g := newGraph(t, Options{GPUs: 2, GPULanes: lanes, DeviceSelection: MinMinTransferTime,
				ParentStream: MultiGPUEarlyDisjoint, Bandwidth: uniformMatrix(2)})
			const src, dst, n = ArrayID(1), ArrayID(2), 1 << 20
			g.Describe(src, n, 1, true)
			g.Describe(dst, n, 0, true)
			cp, err := g.Add(Task{Name: "copy", Kind: KindGPU, WritesInPlace: inPlace,
				Accesses: []Access{acc(src, 0, n, Read), acc(dst, 0, n, Write)}})
			if err != nil {
				t.Fatal(err)
			}
			if cp.Device() != 1 {
				t.Fatalf("the copy ran on GPU %d, want 1 (its source's)", cp.Device())
			}
			reader, err := g.Add(Task{Name: "reader", Kind: KindGPU, Accesses: []Access{acc(dst, 0, n, Read)}})
			if err != nil {
				t.Fatal(err)
			}
			want, moves := 0, 0
			if !inPlace {
				want = 1
			}
			if reader.Device() != want || len(reader.Moves()) != moves {
				t.Fatalf("the reader: GPU %d with moves %+v, want GPU %d and none", reader.Device(), reader.Moves(), want)
			}
		})
	}
}
