package plan

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func fixturePaths(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "mscclpp-v0.9.0", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	return paths
}

func mustLoad(t testing.TB, path string) *Plan {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := Load(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

func mustParse(t testing.TB, text string) *Plan {
	t.Helper()
	p, err := Parse([]byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return p
}

// onePlan returns a one-rank, one-lane plan: gpu holds the rank's chunk fields,
// ops its lane's ops.
func onePlan(gpu, ops string) string {
	return `{"name":"t","collective":"test","protocol":"Simple","inplace":false,"reuse_resources":false,
	"gpus":[{"id":0,` + gpu + `,"channels":[],"remote_buffers":[],"semaphores":[{"init_value":0}],
	"threadblocks":[{"id":0,"channels":[],"remote_buffer_refs":[],"ops":[` + ops + `]}]}]}`
}

// lanesPlan returns a one-rank plan with one lane per element of lanes (each the
// ops of that lane).
func lanesPlan(gpu string, lanes ...string) string {
	var tbs []string
	for i, ops := range lanes {
		tbs = append(tbs, `{"id":`+strconv.Itoa(i)+`,"channels":[],"ops":[`+ops+`]}`)
	}
	return `{"name":"t","collective":"test","protocol":"Simple","inplace":false,
	"gpus":[{"id":0,` + gpu + `,"channels":[],"remote_buffers":[],"semaphores":[{"init_value":0}],
	"threadblocks":[` + strings.Join(tbs, ",") + `]}]}`
}

// twoRanks returns a two-rank plan whose ranks each have one memory channel to
// the other and remote access to the other's input and scratch; ops0 and ops1 are
// the ops of each rank's single lane.
func twoRanks(ops0, ops1 string) string {
	rank := func(r int, ops string) string {
		peer := "1"
		if r == 1 {
			peer = "0"
		}
		return `{"id":` + string(rune('0'+r)) + `,"input_chunks":2,"output_chunks":2,"scratch_chunks":2,
		"channels":[{"channel_type":"memory","connected_to":[` + peer + `]},{"channel_type":"port","connected_to":[` + peer + `]}],
		"remote_buffers":[{"rank":` + peer + `,"type":"i","access_channel_types":["memory"]},
		                  {"rank":` + peer + `,"type":"s","access_channel_types":["memory","port"]}],
		"semaphores":[{"init_value":1}],
		"threadblocks":[{"id":0,"channels":[{"channel_type":"memory","channel_ids":[0]},{"channel_type":"port","channel_ids":[0]}],
		  "remote_buffer_refs":[{"access_channel_type":"memory","remote_buffer_ids":[0,1]},{"access_channel_type":"port","remote_buffer_ids":[1]}],
		  "ops":[` + ops + `]}]}`
	}
	return `{"name":"t2","collective":"test","protocol":"LL","inplace":false,"gpus":[` + rank(0, ops0) + `,` + rank(1, ops1) + `]}`
}

// wantErr checks that err is a *PlanError wrapping sentinel whose message
// contains each of subs.
func wantErr(t *testing.T, err, sentinel error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", sentinel)
	}
	var pe *PlanError
	if !errors.As(err, &pe) {
		t.Fatalf("%v (%T) is not a *PlanError", err, err)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("%v does not wrap %v", err, sentinel)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%v does not mention %q", err, s)
		}
	}
}
