package core

import (
	"os"
	"strings"
	"testing"
)

// A loop-mode engine's context takes LoopUCXDefaults (CMA's rendezvous from 4 MiB on
// one host) where it has no CUDA memory, a thread-mode one UCXDefaults; what the
// environment sets wins over both. (With CUDA, tests/gpu checks the other way.)
func TestLoopModeTakesLoopUCXDefaults(t *testing.T) {
	for _, k := range []string{"UCX_CMA_BW", "UCX_RNDV_THRESH"} {
		if v, ok := os.LookupEnv(k); ok {
			t.Skipf("%s=%s set: the environment decides", k, v)
		}
	}
	thread := newTestEngine(t, Options{})
	tc, err := thread.Config()
	if err != nil {
		t.Fatal(err)
	}
	d := newLoopEngine(t, Options{})
	var lc map[string]string
	var cuda bool
	d.do(func() { lc, err = d.e.Config(); cuda = d.e.ctx.HandlesCUDA() })
	if err != nil {
		t.Fatal(err)
	}
	if cuda {
		if lc["CMA_BW"] != tc["CMA_BW"] || lc["RNDV_THRESH"] != tc["RNDV_THRESH"] {
			t.Errorf("a context with CUDA memory took loop mode's defaults: CMA_BW %q, RNDV_THRESH %q",
				lc["CMA_BW"], lc["RNDV_THRESH"])
		}
		return
	}
	t.Logf("thread: CMA_BW=%s RNDV_THRESH=%s; loop: CMA_BW=%s RNDV_THRESH=%s",
		tc["CMA_BW"], tc["RNDV_THRESH"], lc["CMA_BW"], lc["RNDV_THRESH"])
	if tc["CMA_BW"] == lc["CMA_BW"] {
		t.Errorf("CMA_BW %q in both modes: loop mode should keep UCX's own rating", tc["CMA_BW"])
	}
	if !strings.Contains(lc["RNDV_THRESH"], "intra:4M") || strings.Contains(tc["RNDV_THRESH"], "intra:4M") {
		t.Errorf("RNDV_THRESH: thread %q, loop %q; want the 4 MiB intra-node threshold in loop mode only",
			tc["RNDV_THRESH"], lc["RNDV_THRESH"])
	}
	// Options win over the mode's defaults.
	o := newLoopEngine(t, Options{UCXOptions: map[string]string{"CMA_BW": "3000MBs"}})
	var oc map[string]string
	o.do(func() { oc, err = o.e.Config() })
	if err != nil {
		t.Fatal(err)
	}
	if oc["CMA_BW"] == lc["CMA_BW"] {
		t.Errorf("CMA_BW %q: the option did not win over LoopUCXDefaults", oc["CMA_BW"])
	}
}

func TestLoopUCXDefaultsKeepTheRest(t *testing.T) {
	for k, v := range UCXDefaults {
		switch k {
		case "CMA_BW":
			if _, ok := LoopUCXDefaults[k]; ok {
				t.Errorf("LoopUCXDefaults sets CMA_BW")
			}
		case "RNDV_THRESH":
			if LoopUCXDefaults[k] != "auto,intra:4M,inter:256K" {
				t.Errorf("LoopUCXDefaults RNDV_THRESH = %q", LoopUCXDefaults[k])
			}
		default:
			if LoopUCXDefaults[k] != v {
				t.Errorf("LoopUCXDefaults[%s] = %q, UCXDefaults %q", k, LoopUCXDefaults[k], v)
			}
		}
	}
	if len(LoopUCXDefaults) != len(UCXDefaults)-1 {
		t.Errorf("LoopUCXDefaults has %d settings, UCXDefaults %d", len(LoopUCXDefaults), len(UCXDefaults))
	}
}
