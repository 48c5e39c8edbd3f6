package ucxx

// #include <stdlib.h>
// #include <sys/socket.h>
// #include "shim.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// sockaddr is a socket address in C memory, as UCX's sockaddr parameters want it.
// UCX copies the address during the call, so it is freed right after.
type sockaddr struct {
	ss  *C.struct_sockaddr_storage
	len C.socklen_t
}

func newSockaddr(ip string, port int) (sockaddr, error) {
	if port < 0 || port > 65535 {
		return sockaddr{}, fmt.Errorf("ucxx: port %d out of range: %w", port, StatusInvalidParam)
	}
	cip := C.CString(ip)
	defer C.free(unsafe.Pointer(cip))
	// Allocated in C: UCX reads it during the call that takes it.
	sa := sockaddr{ss: (*C.struct_sockaddr_storage)(C.calloc(1, C.sizeof_struct_sockaddr_storage))}
	if C.ucxx_sockaddr_fill(cip, C.int(port), sa.ss, &sa.len) != 0 {
		C.free(unsafe.Pointer(sa.ss))
		return sockaddr{}, fmt.Errorf("ucxx: %q is not a numeric IP address: %w", ip, StatusInvalidParam)
	}
	return sa, nil
}

// ErrAddressFamily: a listener or connection whose address family differs from the
// TCP transport's. UCX 1.22 gives a connection's transport lanes the device address of
// the connection manager's socket: an IPv6 one written into a TCP endpoint sized for
// IPv4 overruns the heap (uct_tcp_ep_set_dest_addr), and an IPv4 one on IPv6
// interfaces connects but never moves data. So the worker refuses the other family
// before UCX sees it. UCX_TCP_AF_PRIO=inet6 makes the TCP transport use IPv6.
var ErrAddressFamily = &Error{Op: "sockaddr: address family differs from the TCP transport's (UCX_TCP_AF_PRIO)", Status: StatusUnsupported}

// sockaddrFor returns ip:port as a sockaddr of the worker's TCP family (see
// checkFamily); the caller frees it.
func (w *Worker) sockaddrFor(ip string, port int) (sockaddr, error) {
	sa, err := newSockaddr(ip, port)
	if err != nil {
		return sockaddr{}, err
	}
	if err := w.checkFamily(sa, ip); err != nil {
		sa.free()
		return sockaddr{}, err
	}
	return sa, nil
}

// checkFamily returns ErrAddressFamily, wrapped with the address, if s is not of the
// worker's TCP family.
func (w *Worker) checkFamily(s sockaddr, ip string) error {
	if s.ipv6() == w.ipv6 {
		return nil
	}
	want := "inet"
	if s.ipv6() {
		want = "inet6"
	}
	return fmt.Errorf("ucxx: %q needs UCX_TCP_AF_PRIO=%s: %w", ip, want, ErrAddressFamily)
}

func (s sockaddr) ipv6() bool { return s.ss.ss_family == C.AF_INET6 }

func (s sockaddr) ptr() *C.struct_sockaddr { return (*C.struct_sockaddr)(unsafe.Pointer(s.ss)) }

func (s sockaddr) free() { C.free(unsafe.Pointer(s.ss)) }
