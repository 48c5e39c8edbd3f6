//go:build ucxx_wheel

package ucxx

// In an installed wheel the extension sits in site-packages/ucxx_go/ and libucp in
// site-packages/libucx/lib/ (the libucx wheel). ucxx_go also preloads libucx through
// libucx.load_library() before importing the extension; this path is the fallback.

// #cgo LDFLAGS: -Wl,-rpath,$ORIGIN/../libucx/lib
import "C"
