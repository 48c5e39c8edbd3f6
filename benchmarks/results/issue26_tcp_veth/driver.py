import json, os, subprocess, sys, statistics, time, itertools
PY = sys.executable
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "veth_bw.py")
NA, NB = "vbA", "vbB"
def ip(*a, check=True): return subprocess.run(("ip",)+a, check=check, capture_output=True, text=True)
def setup():
    for ns in (NA, NB): ip("netns", "del", ns, check=False)
    ip("netns", "add", NA); ip("netns", "add", NB)
    ip("link", "add", "vbx", "type", "veth", "peer", "name", "vby")
    ip("link", "set", "vbx", "netns", NA, "name", "veth0"); ip("link", "set", "vby", "netns", NB, "name", "veth0")
    for ns, a in ((NA, "10.91.0.1"), (NB, "10.91.0.2")):
        ip("-n", ns, "addr", "add", a + "/24", "dev", "veth0")
        ip("-n", ns, "link", "set", "lo", "up"); ip("-n", ns, "link", "set", "veth0", "up")
def run1(backend, extra, plan, K, port):
    env = {k: v for k, v in os.environ.items() if not k.startswith("UCX_")}
    env.update({"UCX_TLS": "tcp", "UCX_NET_DEVICES": "veth0"}); env.update(extra)
    srv = subprocess.Popen(("ip", "netns", "exec", NA, PY, SCRIPT, "server", backend, "10.91.0.1", str(port), plan, str(K)), env=env, stdout=subprocess.PIPE, text=True)
    assert srv.stdout.readline().strip() == "ready"
    cli = subprocess.run(("ip", "netns", "exec", NB, PY, SCRIPT, "client", backend, "10.91.0.1", str(port), plan, str(K)), env=env, capture_output=True, text=True, timeout=300)
    srv.wait(60)
    if cli.returncode: print(cli.stderr[-2000:], file=sys.stderr); return None
    return json.loads(cli.stdout.strip().splitlines()[-1])
if __name__ == "__main__":
    # configs: name=backend[;K=V;K=V]
    rounds = int(sys.argv[1]); plan = sys.argv[2]; K = int(sys.argv[3]); configs = sys.argv[4:]
    if os.environ.get("SETUP", "1") == "1": setup()
    res = {c: [] for c in configs}; port = 13000 + os.getpid() % 1000
    for r in range(rounds):
        for c in (configs if r % 2 == 0 else configs[::-1]):
            parts = c.split(";"); backend = parts[0]; extra = dict(p.split("=", 1) for p in parts[1:])
            port += 1
            o = run1(backend, extra, plan, K, port)
            if o: res[c].append(o)
            print(r, c, o, flush=True)
    print("\nmedians MB/s (n runs):")
    for c, l in res.items():
        if not l: print(c, "FAILED"); continue
        print(f"{c:60s}", "  ".join(f"{int(s)>>20}MiB {statistics.median(x[s] for x in l):8.0f}" for s in l[0]), f"(n={len(l)})")
