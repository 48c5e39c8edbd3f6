import json, os, subprocess, sys, statistics
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "tests"))
from _netns import Hosts
rounds = int(sys.argv[1]); sizes = sys.argv[2]; N = sys.argv[3]; configs = sys.argv[4:]
PY = sys.executable; S = os.environ.get("SCRIPT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "comm_echo.py"))
hosts = Hosts(2, net=81)
res = {c: [] for c in configs}; port = 41000
try:
    for r in range(rounds):
        for c in (configs if r % 2 == 0 else configs[::-1]):
            parts = c.split(";"); proto = parts[0]; extra = dict(p.split("=", 1) for p in parts[1:])
            port += 1
            srv = hosts[0].run((PY, S, "server", proto, hosts[0].ipv4, str(port), sizes, N), env=hosts[0].env(**extra), stdout=subprocess.PIPE, text=True)
            assert srv.stdout.readline().strip() == "ready"
            cli = subprocess.run(("ip","netns","exec",hosts[1].ns, PY, S, "client", proto, hosts[0].ipv4, str(port), sizes, N), env=hosts[1].env(**extra), capture_output=True, text=True, timeout=300)
            srv.wait(60)
            if cli.returncode: print(cli.stderr[-3000:]); continue
            o = json.loads(cli.stdout.strip().splitlines()[-1]); res[c].append(o); print(r, c, o, flush=True)
finally:
    hosts.close()
print("\nmedian of per-round median echo µs")
for c, l in res.items():
    if l: print(f"{c:55s}", "  ".join(f"{k}:{statistics.median(x[k] for x in l):8.0f}" for k in l[0]))
