import os, subprocess, sys, json, statistics
sys.path.insert(0, "/work/main/benchmarks/results/issue26_tcp_veth")
import driver
PY = "/work/main/.venv/bin/python"
driver.setup()
sizes = [int(x) for x in sys.argv[2].split(",")]
res = {}
port = 23000
for r in range(int(sys.argv[1])):
    for b in (sys.argv[3].split(",")):
        for size in sizes:
            port += 1
            name, _, extra = b.partition(";")
            env = {k: v for k, v in os.environ.items() if not k.startswith("UCX_")}
            env.update({"UCX_NET_DEVICES": "veth0"} if os.environ.get("NOTLS") else {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "veth0"})
            for kv in filter(None, extra.split(";")):
                k, v = kv.split("="); env[k] = v
            n = int(os.environ.get("N", max(50, min(2000, (200 << 20) // size))))
            srv = subprocess.Popen(("ip", "netns", "exec", "vbA", PY, "/tmp/pe/put_echo.py", "server", name, "10.91.0.1", str(port), str(size), str(n)), env=env, stdout=subprocess.PIPE, text=True)
            srv.stdout.readline()
            cli = subprocess.run(("ip", "netns", "exec", "vbB", PY, "/tmp/pe/put_echo.py", "client", name, "10.91.0.1", str(port), str(size), str(n)), env=env, capture_output=True, text=True, timeout=300)
            srv.wait(timeout=60)
            try: us = json.loads(cli.stdout.strip().splitlines()[-1])["us"]
            except Exception: print(cli.stdout, cli.stderr[-2000:]); continue
            res.setdefault((b, size), []).append(us)
for (b, size), v in sorted(res.items(), key=lambda x: (x[0][1], x[0][0])):
    print(f"{size:>10} {b:40s} median {statistics.median(v):9.1f} us  {[round(x) for x in v]}")
