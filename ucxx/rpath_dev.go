//go:build !ucxx_wheel

package ucxx

// Test binaries and development builds find libucp through the repository's .ucx link.
// Wheels are built with the ucxx_wheel tag and find it next to the package instead,
// so no build directory ends up in an installed library's search path.

// #cgo LDFLAGS: -Wl,-rpath,${SRCDIR}/../.ucx/lib
import "C"
