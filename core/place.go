package core

import (
	"encoding/binary"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"syscall"
)

// A place is where a process runs, as far as the choice of UCX's transports to a peer
// is concerned: the machine (its kernel's boot id, which every container on a host
// shares) and the network namespace (the identity of /proc/self/ns/net).
//
// Why it matters: UCX takes its shared-memory transports (sysv, posix) between two
// processes of one machine whose IPC namespace is the same, whatever their network
// namespaces (src/uct/sm/base/sm_iface.c checks the IPC namespace alone). But a
// shared-memory transport wakes a sleeping peer through a Unix socket of an abstract
// address (src/uct/sm/mm/base/mm_iface.c, mm_ep.c), and abstract addresses belong to a
// network namespace: across two, the wake-up's sendto fails with ECONNREFUSED, which
// UCX ignores. A process waiting on its worker's event file descriptor (thread mode's
// sleep, loop mode's event loop) then learns of a message only when something else
// wakes it: measured between two namespaces on the dev VM, an 8-byte echo whose
// server paused 5 ms took 1.0 s in loop mode and 18.6 ms in thread mode, 5.3-5.4 ms
// over TCP. Two such processes are made to reach each other as two hosts would, by
// their network transports only (hello.networkAddress).
type place struct {
	boot  [16]byte // the kernel's boot id; zero: unknown
	netNS [16]byte // /proc/self/ns/net's device and inode; zero: unknown
}

// known reports whether both of p's parts could be read.
func (p place) known() bool { return p.boot != [16]byte{} && p.netNS != [16]byte{} }

// sameMachineOtherNetwork reports whether a peer at q runs on p's machine in another
// network namespace (false when either place is unknown): UCX's shared memory between
// the two would never wake the receiver.
func (p place) sameMachineOtherNetwork(q place) bool {
	return p.known() && q.known() && p.boot == q.boot && p.netNS != q.netNS
}

// ownPlace is this process's place, read once (a process that moves to another
// network namespace after its first connection keeps telling peers the first).
var ownPlace = sync.OnceValue(func() place {
	return readPlace("/proc/sys/kernel/random/boot_id", "/proc/self/ns/net")
})

// readPlace reads a place from a boot id file (a UUID's text) and a namespace file;
// what cannot be read stays zero.
func readPlace(bootFile, netNSFile string) place {
	var p place
	if b, err := os.ReadFile(bootFile); err == nil {
		if id, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(b)), "-", "")); err == nil && len(id) == len(p.boot) {
			copy(p.boot[:], id)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(netNSFile, &st); err == nil {
		binary.LittleEndian.PutUint64(p.netNS[0:], uint64(st.Dev))
		binary.LittleEndian.PutUint64(p.netNS[8:], st.Ino)
	}
	return p
}
