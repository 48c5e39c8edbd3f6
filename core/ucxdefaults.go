package core

import (
	"maps"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// UCXDefaults are the UCX settings an Engine's context uses unless the environment
// (UCX_<KEY>) or Options.UCXOptions set them; a default the loaded UCX does not know
// is left out. They are the fastest settings found that keep peer error handling on
// (benchmarks/ucx_settings.md has the study and the settings that lost):
//
//   - MM_ERROR_HANDLING=y: UCX's shared-memory transports accept endpoints with peer
//     error handling, which UCX refuses by default; without it two processes on one
//     host talk over TCP on loopback.
//
//   - TCP_TX_SEG_SIZE, TCP_RX_SEG_SIZE=256K: the TCP transport's buffer size. UCX's
//     8 KiB default cuts every message above it into 8 KiB fragments, each copied and
//     sent on its own (rendezvous included: over TCP UCX pipelines it through these
//     buffers). Each buffer in use holds 256 KiB.
//
//   - TCP_CM_REUSEADDR=y: a listener binds with SO_REUSEADDR, as TCP servers do, so a
//     port whose connections are still in TIME_WAIT (a scheduler restarted on its
//     port) can be listened on again at once; two listeners on one port stay refused.
//
//   - ADAPTIVE_PROGRESS=n: the worker keeps every transport interface active instead
//     of activating one when an endpoint starts to use it and deactivating it when
//     the last one closes. Each activation installs UCX's active-message handlers,
//     and the TCP transport answers each of those with a full interface query
//     (sysfs, ethtool, /proc/net/route): about 9 ms of every connection's set-up.
//
//   - RNDV_FRAG_MEM_TYPES=host: the rendezvous pipelines stage through host memory
//     only. With UCX's "host,cuda", the first selection of a protocol for CUDA memory
//     allocates a CUDA staging buffer and frees it (cuMemFree) to learn its memory
//     domain; cuMemFree waits for the device, on the progress thread, and a stream
//     held by a wait for a word that thread writes (a DAG vertex after a receive)
//     then never moves: a deadlock (H200, UCX 1.22). Transfers of CUDA memory go
//     directly (cuda_ipc) or through host buffers (TCP) either way.
//
//   - CMA_MEMORY_INVALIDATE=y, CMA_BW=2000MBs: one-sided puts and gets between two
//     processes on one host go over CMA (process_vm_writev/readv: one copy) instead
//     of TCP on loopback (puts) and active messages through shared memory (gets).
//     With peer error handling UCX takes a transport for RMA and rendezvous lanes only
//     if its memory domain can invalidate registrations, so that a peer found failed
//     can no longer reach a buffer handed back with an error; TCP is exempt (a failure
//     closes its connection), and CMA declares it only under this setting, UCX's switch
//     for this very case (openucx/ucx#7701): CMA registers nothing, so there is nothing
//     to invalidate. What remains: a peer declared failed while still alive (not one
//     that died) could finish a CMA read or write of memory already handed back.
//     UCX rates CMA at 11,145 MB/s and with that also moves every tag and active
//     message from 5 KB up to a CMA rendezvous, slower one message at a time on the
//     dev VM (ucx_perftest tag_lat -e, one way: 64 KiB 6.2 -> 9.1 us, 1 MiB 73 -> 153
//     us); rated at 2000 MB/s (500 to 3000 all do), it keeps every send protocol UCX
//     picks without CMA (UCX_PROTO_INFO: only the put and get tables change). Puts of
//     1 MiB on the VM: 4.4 -> 11.7 GB/s (0.60x -> 1.6-2.1x a send), 8-byte put + flush
//     95 -> 40 us, sends as before (benchmarks/results/issue26_host_puts.md).
//
//   - RNDV_THRESH=auto,inter:256K: between hosts (UCX's inter-node endpoints) a
//     message from 256 KiB up goes by rendezvous instead of UCX's own choice there,
//     multi-frag eager up to about 24 MB. Both copy each piece out of a TCP segment
//     buffer (UCX_PROTO_INFO: the rendezvous data goes by active messages, rndv/am;
//     the TCP transport's own put, which would land in place, needs remote keys its
//     memory domain does not have), but with four messages in flight the rendezvous
//     was faster: two netns joined by a veth pair, UCX_TLS=tcp, one-way (medians of
//     3 alternated runs, 2-core VM): 1 MiB 718 -> 1448 MB/s (asyncio socket stream
//     2938), 10 MiB within the noise (2135 / 1817; runs spread 1500-2800). With one
//     message in flight (a raw echo, Dask's network echo) UCX's choice measured a
//     little faster, within the noise of Dask's runs. Intra-node endpoints (shared
//     memory, loopback) keep UCX's threshold (benchmarks/ucx_settings.md).
//
//   - TCP_PUT_ENABLE=n: the TCP transport does not offer its zero-copy put. That put
//     lands at whatever address the peer's request names, and UCX's TCP transport
//     serves such requests from any peer whatever this side offers (UCX 1.22,
//     uct_tcp_ep_handle_put_req); offered, any peer's UCX takes it for a put on an
//     endpoint without error handling, and writes anywhere in this process. Not
//     offered, a peer's stock UCX emulates the put in software, which a context
//     without RMA (Options.OneSided off) drops. Our endpoints all have error handling,
//     which keeps TCP out of UCX's RMA and rendezvous lanes, so nothing of ours used
//     it. (A peer running a UCX changed to send the request anyway still can: README,
//     "What UCX itself trusts".)
//
// RNDV_SCHEME=put_zcopy, as fast over TCP, is not among them: with shared memory and
// no CMA it leaves UCX no rendezvous protocol, so every message is sent eagerly.
var UCXDefaults = map[string]string{
	"MM_ERROR_HANDLING":     "y",
	"TCP_TX_SEG_SIZE":       "256K",
	"TCP_RX_SEG_SIZE":       "256K",
	"TCP_CM_REUSEADDR":      "y",
	"ADAPTIVE_PROGRESS":     "n",
	"RNDV_FRAG_MEM_TYPES":   "host",
	"CMA_MEMORY_INVALIDATE": "y",
	"CMA_BW":                "2000MBs",
	"RNDV_THRESH":           "auto,inter:256K",
	"TCP_PUT_ENABLE":        "n",
}

// LoopUCXDefaults are UCXDefaults for an engine in Loop mode, where the process's
// event loop is the worker's only progress and shares the process's few CPUs with its
// work (a Dask worker per core, picked by auto): CMA rated at UCX's own 11,145 MB/s
// (CMA_BW not set) and RNDV_THRESH=auto,intra:4M,inter:256K, so that a message of
// 4 MiB or more between processes of one host goes by CMA's rendezvous, the receiver
// reading it whole in one call, instead of UCX's fragmented rendezvous through shared
// memory, which the sender must progress fragment by fragment (messages from 8 KB to
// 4 MiB go by multi-fragment eager, as up to 580 KB under UCXDefaults). Between two
// processes each running a GIL-holding thread beside its loop, 4 messages in flight
// (benchmarks/results/session34/busy_loop_probe.py, dev VM): 4 MiB 259 -> 502 MB/s,
// 16 MiB 452 -> 2,057, 64 MiB 563-597 -> 1,965-2,163; idle, 64 MiB 4,406 -> 6,460. Dask
// on one host (3 rounds, medians): p2p rechunk 4.90 -> 4.30 s first, 1.55 -> 1.35 again,
// transpose-sum 0.94 -> 0.87 s, the network rows unchanged. What it costs: the idle
// ping-pong of two processes that do nothing else, 64 MiB 5.8 -> 4.9 GiB/s (1 MiB 4.1
// -> 4.4), where two cores copying in turn beat one copy; thread mode, which has a
// core of its own to progress with, keeps UCXDefaults.
//
// Only for a context without CUDA memory (newContext): UCX's RNDV_THRESH holds for
// every memory type, and with it CUDA messages under 4 MiB went eager through shared
// memory instead of by cuda_ipc's rendezvous (one H100, loop mode: 1 MiB 4.89 GiB/s ->
// 693 MiB/s, 16 MiB 72.8 -> 38.2 GiB/s).
var LoopUCXDefaults = loopUCXDefaults()

func loopUCXDefaults() map[string]string {
	d := maps.Clone(UCXDefaults)
	delete(d, "CMA_BW")
	d["RNDV_THRESH"] = "auto,intra:4M,inter:256K"
	return d
}

// newContext makes an engine's UCX context with features: with LoopUCXDefaults in Loop
// mode unless the context so made supports CUDA memory (then it is made again with
// UCXDefaults), with UCXDefaults otherwise; options and the environment win over both.
func newContext(mode ProgressMode, options map[string]string, features ucxx.Features) (*ucxx.Context, error) {
	if mode != Loop {
		return ucxx.NewContextWithDefaults(UCXDefaults, options, features)
	}
	ctx, err := ucxx.NewContextWithDefaults(LoopUCXDefaults, options, features)
	if err != nil || !ctx.HandlesCUDA() {
		return ctx, err
	}
	ctx.Close()
	return ucxx.NewContextWithDefaults(UCXDefaults, options, features)
}

// UCXLoadDefaults are UCX settings read when the UCX libraries load, before any
// context exists, so they cannot be applied to one: the Python package puts them in
// the environment before it loads libucx, unless UCX_<KEY> is set there. As
// "KEY=value" pairs separated by commas:
//
//   - MEM_BISTRO_GRACE_DURATION=5ms: UCX patches the entry of each memory function it
//     hooks (mmap, munmap, ...) and waits this long per function for threads already
//     inside the patched bytes; UCX's 50 ms made every process spend about 400 ms
//     loading UCX (a Dask cluster's start was 2.5x tcp's). 5 ms keeps a grace a
//     hundred thousand times longer than the patched instructions take.
const UCXLoadDefaults = "MEM_BISTRO_GRACE_DURATION=5ms"
