"""One line summing up a `dask_bench.py --json` report: its timings (seconds) and its
network bandwidths (MB/s). For machine.sh's dask step and the session scripts.

    python benchmarks/gpu/dask_summary.py REPORT.json
"""

import json
import sys

result = json.load(open(sys.argv[1]))["results"][0]
print(" ".join(f"{k}={v:.3f}" for k, v in result.items() if k.endswith("_s")),
      "net", " ".join(f"{k}={v:.0f}" for k, v in result["network_MBps"].items()))
