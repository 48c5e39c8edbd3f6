package execution

import "testing"

// TestMapModeFromEnv: UCXGO_DAG_MAP_MANAGED's values, and the default (copy
// destinations) for unset or anything else.
func TestMapModeFromEnv(t *testing.T) {
	for v, want := range map[string]mapMode{"0": mapNone, "1": mapEveryArray, "copies": mapCopyDestinations,
		"": mapCopyDestinations, "off": mapCopyDestinations} {
		if got := mapModeFromEnv(v); got != want {
			t.Errorf("mapModeFromEnv(%q) = %d, want %d", v, got, want)
		}
	}
}

// TestMarkMappedKeepsToItsDescription: a mapping (or a refusal) is recorded for the
// description it was asked for only: not for an id described anew since (even at the
// same address), nor for one forgotten.
func TestMarkMappedKeepsToItsDescription(t *testing.T) {
	var tab arrayTable
	tab.set(arrA, arrayInfo{base: 4096, size: 64, managed: true})
	first, _ := tab.get(arrA)
	tab.set(arrA, arrayInfo{base: 4096, size: 128, managed: true}) // the same base, described anew
	if tab.markMapped(arrA, first.gen, true) {
		t.Fatal("a mapping asked for the first description was recorded for the second")
	}
	if info, _ := tab.get(arrA); info.mapped || info.refused {
		t.Fatalf("the second description changed: %+v", info)
	}
	second, _ := tab.get(arrA)
	if !tab.markMapped(arrA, second.gen, true) {
		t.Fatal("the mapping of the current description was not recorded")
	}
	if info, _ := tab.get(arrA); !info.mapped || info.refused {
		t.Fatalf("after the mapping: %+v", info)
	}
	tab.set(arrB, arrayInfo{base: 8192, size: 64, managed: true})
	b, _ := tab.get(arrB)
	if tab.markMapped(arrB, b.gen, false) {
		t.Fatal("a refused advice was recorded as a mapping")
	}
	if info, _ := tab.get(arrB); info.mapped || !info.refused {
		t.Fatalf("after the refusal: %+v", info)
	}
	tab.forget(arrB)
	if tab.markMapped(arrB, b.gen, true) {
		t.Fatal("a forgotten id was marked mapped")
	}
	if _, ok := tab.get(arrB); ok {
		t.Fatal("markMapped described a forgotten id again")
	}
}
