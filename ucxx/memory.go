package ucxx

// #include <stdlib.h>
import "C"

import "unsafe"

// CAlloc allocates n zeroed bytes of C memory, for buffers that UCX keeps across
// calls (the connection handshake's). Free them with CFree.
func CAlloc(n int) unsafe.Pointer { return C.calloc(1, C.size_t(n)) }

// CFree frees memory from CAlloc.
func CFree(p unsafe.Pointer) { C.free(p) }
