package ucxx

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"unsafe"
)

// Context is a UCP context (ucp_context_h) with tag, stream, active message, RMA and
// wake-up features.
type Context struct {
	h   C.ucp_context_h
	cfg *C.ucp_config_t // the configuration it was made with, for Config
	// ipv6: the TCP transport's interfaces use IPv6 addresses (UCX_TCP_AF_PRIO names
	// inet6 first); sockaddr connections must use the same family (see sockaddr.go).
	ipv6 bool
	// unified: UCX's unified mode (UCX_UNIFIED_MODE), where worker addresses carry
	// resource indices in place of lengths (parseWorkerAddress).
	unified bool
	// features: what NewContext was asked for (Features).
	features Features
}

// Features are the UCX features a context offers beyond tags, streams, active
// messages and wake-ups, which every context has.
type Features uint

// FeatureRMA is UCX's remote memory access (UCP_FEATURE_RMA): ucp_put and ucp_get on
// the context's endpoints, and, as their target, serving the puts and gets of peers
// that go by UCX's software emulation (transports without RMA of their own, such as
// TCP). Those UCX serves at whatever address the peer names, checked against no key
// (UCX 1.22, src/ucp/rma/rma_sw.c): a context with it lets every peer with an endpoint
// to it read and write any of the process's memory.
const FeatureRMA Features = 1

// NewContext reads UCX's configuration from the environment, applies options (keys
// without the UCX_ prefix, e.g. "TLS": "tcp,self"), and creates a context with
// features.
//
// Errors: *Error with StatusNoElem-like statuses for an unknown option key or value,
// or the status of ucp_init.
func NewContext(options map[string]string, features Features) (*Context, error) {
	return NewContextWithDefaults(nil, options, features)
}

// NewContextWithDefaults is NewContext with defaults applied first: each default whose
// UCX_<KEY> environment variable is unset and which options do not name. A default
// this UCX does not know, or whose value it rejects, is left out.
func NewContextWithDefaults(defaults, options map[string]string, features Features) (*Context, error) {
	var cfg *C.ucp_config_t
	if st := Status(C.ucp_config_read(nil, nil, &cfg)); st != StatusOK {
		return nil, st.Err("ucp_config_read")
	}
	keep := false
	defer func() {
		if !keep {
			C.ucp_config_release(cfg)
		}
	}()
	for _, k := range sortedKeys(defaults) {
		name := strings.TrimPrefix(k, "UCX_")
		_, inEnv := os.LookupEnv("UCX_" + name)
		if _, inOptions := option(options, name); !inEnv && !inOptions {
			_ = configModify(cfg, name, defaults[k]) // unknown to this UCX: left out
		}
	}
	for _, k := range sortedKeys(options) {
		if st := configModify(cfg, strings.TrimPrefix(k, "UCX_"), options[k]); st != StatusOK {
			return nil, &Error{Op: fmt.Sprintf("ucp_config_modify(%s=%s)", k, options[k]), Status: st}
		}
	}
	c := &Context{cfg: cfg, ipv6: tcpPrefersIPv6(options), features: features}
	rma := C.int(0)
	if features&FeatureRMA != 0 {
		rma = 1
	}
	if st := Status(C.ucxx_context_create(cfg, rma, &c.h)); st != StatusOK {
		return nil, st.Err("ucp_init")
	}
	keep = true
	c.unified = configBool(c.Config()["UNIFIED_MODE"])
	return c, nil
}

// configBool reads a UCX boolean setting as UCX does (y, yes, on, 1; any case).
func configBool(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "y", "yes", "on", "1":
		return true
	}
	return false
}

// configModify sets one UCX variable (name without the UCX_ prefix) in cfg.
func configModify(cfg *C.ucp_config_t, name, value string) Status {
	ck, cv := C.CString(name), C.CString(value)
	defer C.free(unsafe.Pointer(ck))
	defer C.free(unsafe.Pointer(cv))
	return Status(C.ucp_config_modify(cfg, ck, cv))
}

// option is the value options give name, spelt with or without the UCX_ prefix.
func option(options map[string]string, name string) (string, bool) {
	if v, ok := options[name]; ok {
		return v, true
	}
	v, ok := options["UCX_"+name]
	return v, ok
}

// sortedKeys: m's keys in order, so that settings apply the same way every time.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tcpPrefersIPv6 reports whether UCX_TCP_AF_PRIO (an option, else the environment, else
// UCX's default "inet,inet6") names inet6 first.
func tcpPrefersIPv6(options map[string]string) bool {
	prio, ok := option(options, "TCP_AF_PRIO")
	if !ok {
		prio = os.Getenv("UCX_TCP_AF_PRIO")
	}
	first, _, _ := strings.Cut(prio, ",")
	return strings.TrimSpace(strings.ToLower(first)) == "inet6"
}

// Config returns the UCX configuration the context was created with, by name without
// the UCX_ prefix (e.g. "TLS": "all").
func (c *Context) Config() map[string]string {
	out := make(map[string]string)
	s := C.ucxx_config_print(c.cfg)
	if s == nil {
		return out
	}
	defer C.free(unsafe.Pointer(s))
	for _, line := range strings.Split(C.GoString(s), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		out[strings.TrimPrefix(strings.TrimSpace(k), "UCX_")] = v
	}
	return out
}

// Close releases the context. Every worker of it must be closed first.
func (c *Context) Close() {
	if c.h != nil {
		C.ucp_cleanup(c.h)
		c.h = nil
	}
	if c.cfg != nil {
		C.ucp_config_release(c.cfg)
		c.cfg = nil
	}
}

// Version returns the version of the loaded libucp, e.g. "1.22.0".
func Version() string { return C.GoString(C.ucp_get_version_string()) }

// Info is UCX's description of the context (ucp_context_print_info).
func (c *Context) Info() string { return takeCString(C.ucxx_context_info(c.h)) }

// HandlesCUDA reports whether the context supports CUDA memory (its memory types, as
// UCX found them when it loaded its transports: a CUDA driver and UCX's CUDA modules).
func (c *Context) HandlesCUDA() bool {
	return C.ucxx_context_memory_types(c.h)&(1<<C.UCS_MEMORY_TYPE_CUDA) != 0
}

// Info is UCX's description of the worker (ucp_worker_print_info): its transports and
// devices among other things.
func (w *Worker) Info() string { return takeCString(C.ucxx_worker_info(w.h)) }

// takeCString converts and frees a malloc'd C string.
func takeCString(s *C.char) string {
	if s == nil {
		return ""
	}
	defer C.free(unsafe.Pointer(s))
	return C.GoString(s)
}
