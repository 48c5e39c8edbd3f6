package ucxx

// #include <stdlib.h>
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

func (s sockaddr) ptr() *C.struct_sockaddr { return (*C.struct_sockaddr)(unsafe.Pointer(s.ss)) }

func (s sockaddr) free() { C.free(unsafe.Pointer(s.ss)) }
