"""A probe (session 35, issue 26's GPU w4 row): gpu_bench.py's client under cProfile, ucxx_go, one size, window 1
and 4 in turn, many messages, printing the time a message and the client's top functions.

    PROFILE_MESSAGES=N python gpu_window_profile.py [SIZE] [GPUS]      # e.g. 1048576 0,0
"""
import cProfile, os, pstats, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import gpu_bench  # noqa: E402

# Both processes must count the same messages: the server (spawned, importing this file
# without running its main part) takes the count from the environment too.
N = int(os.environ.get("PROFILE_MESSAGES", "4000"))
gpu_bench.iterations = lambda s: N

if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
    gpus = tuple(int(g) for g in (sys.argv[2] if len(sys.argv) > 2 else "0,0").split(","))
    for window in (1, 4, 1, 4):
        pr = cProfile.Profile()
        t0 = time.perf_counter()
        pr.enable()
        res, transports = gpu_bench.run_pair("ucxx_go", [size], window, gpus)
        pr.disable()
        mbps = res["MBps"][str(size)]
        print(f"window {window}: {mbps:.0f} MB/s, {size / mbps:.1f} us a message ({transports})", flush=True)
        if window == 4:
            st = pstats.Stats(pr)
            st.sort_stats("tottime").print_stats(22)
