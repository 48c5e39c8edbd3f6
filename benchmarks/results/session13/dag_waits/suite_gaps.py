"""Diagnostic: the suite's Dag backend with per-launch timestamps (monkeypatched), vec and bs."""
import gc, os, sys, time
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks/dag"))
import backends, run
marks = []
gcev = []
gc.callbacks.append(lambda phase, info: gcev.append((time.perf_counter_ns(), phase, info["generation"])))
orig_launch, orig_run = backends.Dag.launch, backends.Dag.run
def launch(self, *a, **k):
    t = time.perf_counter_ns(); orig_launch(self, *a, **k); marks.append((t, time.perf_counter_ns()))
def run_(self, build):
    marks.clear(); gcev.clear()
    t0 = time.perf_counter_ns(); r = orig_run(self, build); t1 = time.perf_counter_ns()
    calls = [round((b - a) / 1e3, 1) for a, b in marks]
    gaps = [round((marks[i][0] - marks[i - 1][1]) / 1e3, 1) for i in range(1, len(marks))]
    print(f"REP {self.name} total {(t1-t0)/1e3:.0f} us; first launch at {(marks[0][0]-t0)/1e3:.1f}; calls {calls}; gaps {gaps}; "
          f"sync {(t1-marks[-1][1])/1e3:.0f}; gc {[(round((t-t0)/1e3), p[0], g) for t, p, g in gcev]}", flush=True)
    return r
backends.Dag.launch, backends.Dag.run = launch, run_
orig_cl = backends.CupyStreams.launch
cmarks = []
def claunch(self, *a, **k):
    t = time.perf_counter_ns(); orig_cl(self, *a, **k); cmarks.append((t, time.perf_counter_ns()))
backends.CupyStreams.launch = claunch
sys.exit(run.main(["--shapes", "vec,bs", "--backends", "dag-async,cupy-streams", "--no-comm", "--no-micro", "--reps", "12",
                   "--budget-s", "60", "--out", sys.argv[1]]))
