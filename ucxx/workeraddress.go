package ucxx

import "fmt"

// A worker address is UCX's packed description of a worker's transports
// (ucp_worker_get_address), which a peer hands over for ucp_ep_create. ucp_ep_create
// takes no length: UCX walks the bytes trusting every length and count in them, and
// asserts (aborting the process) on a version it does not know. parseWorkerAddress
// walks them first, as ucp_address_unpack does for ucp_ep_create
// (openucx/ucx src/ucp/wireup/address.c at v1.22.0, unchanged in 9466d10: the layout
// comments at its top, ucp_address_unpack and the helpers it calls), and refuses an
// address whose walk leaves the bytes given, that UCX would refuse or stop at, or whose
// values UCX uses unchecked as indices or shifts.
const (
	addrHeaderVersionMask = 0x0f // the header's low 4 bits: the address version
	addrVersion1          = 0    // UCP_OBJECT_VERSION_V1
	addrVersion2          = 1    // UCP_OBJECT_VERSION_V2
	addrHeaderShift       = 4    // version 1: the flags in the header's high 4 bits

	addrFlagDebugInfo  = 1 << 0 // UCP_ADDRESS_HEADER_FLAG_DEBUG_INFO: the worker's name follows
	addrFlagWorkerUUID = 1 << 1 // ..._WORKER_UUID: 8 bytes
	addrFlagClientID   = 1 << 2 // ..._CLIENT_ID: 8 bytes

	addrNullResource  = 0xff // UCP_NULL_RESOURCE: no devices
	addrFlagLast      = 0x80 // UCP_ADDRESS_FLAG_LAST: the last device, iface or ep address
	addrFlagHasEPAddr = 0x40 // UCP_ADDRESS_FLAG_HAS_EP_ADDR, in an iface address's length
	addrFlagNumPaths  = 0x40 // UCP_ADDRESS_FLAG_NUM_PATHS, in a device address's length
	addrFlagSysDevice = 0x20 // UCP_ADDRESS_FLAG_SYS_DEVICE, in a device address's length
	addrMDEmptyDev    = 0x80 // UCP_ADDRESS_FLAG_MD_EMPTY_DEV: a device without interfaces
	addrMDMask        = 0x7f // UCP_ADDRESS_FLAG_MD_MASK
	addrMDLegacyBits  = 0x60 // UCP_ADDRESS_FLAG_MD_INDEX_LEGACY_BITS, cleared in version 1
	addrDeviceLenMask = 0x1f // UCP_ADDRESS_DEVICE_LEN_MASK
	addrIfaceLenMask  = 0x3f // UCP_ADDRESS_IFACE_LEN_MASK

	addrIfaceAttrV1 = 16 // sizeof(ucp_address_packed_iface_attr_t)
	addrIfaceAttrV2 = 8  // sizeof(ucp_address_v2_packed_iface_attr_t)

	addrMaxResources = 128 // UCP_MAX_RESOURCES: interfaces (and devices) an address may list
	addrMaxLanes     = 64  // UCP_MAX_LANES: ep addresses an interface may list
	addrMaxMDs       = 64  // UCP_MAX_MDS: md indices are bits of a 64-bit map
)

// errWorkerAddress is the error of a malformed worker address.
func errWorkerAddress(format string, args ...any) error {
	return &Error{Op: "worker address: " + fmt.Sprintf(format, args...), Status: StatusInvalidAddr}
}

// addressReader reads a worker address front to back; a read past its end fails.
type addressReader struct {
	b   []byte
	off int
	err error
}

func (r *addressReader) byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.err = errWorkerAddress("ends at byte %d, in %s", r.off, what)
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// peek is the next byte, not read (0 past the end: the read that follows fails).
func (r *addressReader) peek() byte {
	if r.err != nil || r.off >= len(r.b) {
		return 0
	}
	return r.b[r.off]
}

func (r *addressReader) skip(n int, what string) {
	if r.err != nil {
		return
	}
	if n > len(r.b)-r.off {
		r.err = errWorkerAddress("%s of %d bytes at byte %d runs past its %d bytes", what, n, r.off, len(r.b))
		return
	}
	r.off += n
}

// extended reads a value packed as ucp_address_pack_byte_extended does: the bits of
// mask in one byte, and in version 2, where they are all set, the next byte whole.
func (r *addressReader) extended(mask byte, version byte, what string) byte {
	v := r.byte(what) & mask
	if version != addrVersion1 && v == mask {
		v = r.byte(what)
	}
	return v
}

// addrEntry is what parseWorkerAddress saw of one interface an address lists.
type addrEntry struct {
	tlNameCsum       uint16 // ucs_crc16_string of the transport's name
	devLen, ifaceLen int
	epAddrs          int
}

// parseWorkerAddress returns the interfaces address lists if ucp_ep_create can read it
// (see above), else an *Error with StatusInvalidAddr. With unified, the worker's context
// runs UCX's unified mode (UCX_UNIFIED_MODE), where lengths come from the local
// interfaces, not the address: only the header is checked then, and no interfaces are
// returned.
func parseWorkerAddress(address []byte, unified bool) ([]addrEntry, error) {
	r := &addressReader{b: address}
	header := r.byte("the header")
	version := header & addrHeaderVersionMask
	var flags byte
	switch version {
	case addrVersion1:
		flags = header >> addrHeaderShift
	case addrVersion2:
		flags = r.byte("the header")
	default:
		return nil, errWorkerAddress("version %d", version)
	}
	if unified {
		return nil, r.err
	}
	// ucp_ep_create unpacks with the worker's default flags: the worker's uuid (in
	// version 1 always there) and name (where the address has one).
	if version == addrVersion1 || flags&addrFlagWorkerUUID != 0 {
		r.skip(8, "the worker's uuid")
	}
	if flags&addrFlagClientID != 0 {
		r.skip(8, "the client id")
	}
	if flags&addrFlagDebugInfo != 0 {
		r.skip(int(r.byte("the worker's name")), "the worker's name")
	}
	if r.err == nil && r.off == len(r.b) {
		return nil, errWorkerAddress("ends before its devices")
	}
	if r.peek() == addrNullResource {
		return nil, r.err // no devices
	}
	ifaceAttr := addrIfaceAttrV2
	if version == addrVersion1 {
		ifaceAttr = addrIfaceAttrV1
	}
	var entries []addrEntry
	for devices, lastDevice := 0, false; !lastDevice && r.err == nil; devices++ {
		if devices == addrMaxResources {
			return nil, errWorkerAddress("more than %d devices", addrMaxResources)
		}
		emptyDevice := r.peek()&addrMDEmptyDev != 0
		md := r.extended(addrMDMask, version, "a device's md index")
		if version == addrVersion1 {
			md &^= addrMDLegacyBits
		}
		if !emptyDevice && md >= addrMaxMDs {
			return nil, errWorkerAddress("md index %d", md)
		}
		lenByte := r.peek()
		lastDevice = lenByte&addrFlagLast != 0
		devLen := r.extended(addrDeviceLenMask, version, "a device address's length")
		if lenByte&addrFlagNumPaths != 0 {
			r.skip(1, "a device's number of paths")
		}
		if lenByte&addrFlagSysDevice != 0 {
			r.skip(1, "a device's system device")
		}
		r.skip(int(devLen), "a device address")
		for lastIface := emptyDevice; !lastIface && r.err == nil; {
			if len(entries) == addrMaxResources {
				return nil, errWorkerAddress("more than %d interfaces", addrMaxResources)
			}
			e := addrEntry{devLen: int(devLen)}
			e.tlNameCsum = uint16(r.byte("a transport's name checksum"))
			e.tlNameCsum |= uint16(r.byte("a transport's name checksum")) << 8
			r.skip(ifaceAttr, "an interface's attributes")
			ifaceLenByte := r.peek()
			lastIface = ifaceLenByte&addrFlagLast != 0
			e.ifaceLen = int(r.extended(addrIfaceLenMask, version, "an interface address's length"))
			r.skip(e.ifaceLen, "an interface address")
			for lastEP := ifaceLenByte&addrFlagHasEPAddr == 0; !lastEP && r.err == nil; e.epAddrs++ {
				if e.epAddrs == addrMaxLanes {
					return nil, errWorkerAddress("more than %d ep addresses on an interface", addrMaxLanes)
				}
				r.skip(int(r.byte("an ep address's length")), "an ep address")
				lastEP = r.byte("an ep address's lane")&addrFlagLast != 0
			}
			entries = append(entries, e)
		}
	}
	return entries, r.err
}

// addrShape is what this worker's own address says of a transport's interfaces:
// whether they have device and interface addresses.
type addrShape struct{ dev, iface bool }

// connectable returns nil if address may be given to ucp_ep_create on w:
// checkWorkerAddress; no ep addresses (a worker address carries none); and where an
// interface's transport is one of w's, a device address and an interface address
// wherever w's own have them. UCX's transports read those unchecked (an empty TCP
// device address is a NULL pointer to uct_tcp_iface_is_reachable_v2), so a shorter
// one than the transport packs is read past its end: ConnectAddressWith lends UCX the
// address followed by addrPadding zero bytes, which keeps such reads within it.
// Their contents stay unchecked: UCX trusts a worker address as it trusts what its
// listeners' connection requests carry.
func (w *Worker) connectable(address []byte) error {
	entries, err := parseWorkerAddress(address, w.unified)
	if err != nil || w.unified {
		return err
	}
	if w.shapes == nil {
		own, err := w.Address()
		if err != nil {
			return err
		}
		ownEntries, err := parseWorkerAddress(own, false)
		if err != nil {
			return fmt.Errorf("ucxx: this worker's own address: %w", err)
		}
		w.shapes = make(map[uint16]addrShape, len(ownEntries))
		for _, e := range ownEntries {
			s := w.shapes[e.tlNameCsum]
			w.shapes[e.tlNameCsum] = addrShape{dev: s.dev || e.devLen > 0, iface: s.iface || e.ifaceLen > 0}
		}
	}
	for _, e := range entries {
		if e.epAddrs > 0 {
			return errWorkerAddress("ep addresses on transport %#04x", e.tlNameCsum)
		}
		s, ok := w.shapes[e.tlNameCsum]
		if ok && (s.dev && e.devLen == 0 || s.iface && e.ifaceLen == 0) {
			return errWorkerAddress("an empty device or interface address on transport %#04x", e.tlNameCsum)
		}
	}
	return nil
}

// addrPadding is how many zero bytes follow an address lent to ucp_ep_create (see
// connectable): more than any transport's fixed-size device, interface or ep address.
const addrPadding = 256
