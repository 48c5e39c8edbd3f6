package collective

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
)

// worldKey is a world's secret (Options.Secret), the key of the MACs that
// authenticate the bootstrap's records (bootstrap.go has the records). With no secret
// the key is empty and the MACs are public values.
type worldKey []byte

const (
	macBytes   = sha256.Size
	nonceBytes = 32
)

type (
	mac   [macBytes]byte
	nonce [nonceBytes]byte
)

// Each record's MAC is taken under a label of its own, so that one kind of record's
// MAC is never another's.
var (
	helloLabel = []byte("ucxx-go bootstrap hello\x00")
	tableLabel = []byte("ucxx-go bootstrap table\x00")
)

// newNonce draws a rank's nonce for one bootstrap.
func newNonce() nonce {
	var n nonce
	rand.Read(n[:]) // never fails (crypto/rand)
	return n
}

// sum is the HMAC-SHA256 under k of parts, one after another.
func (k worldKey) sum(parts ...[]byte) mac {
	h := hmac.New(sha256.New, k)
	for _, p := range parts {
		h.Write(p)
	}
	var m mac
	h.Sum(m[:0])
	return m
}

// helloMAC is the MAC of hello b (an encoded hello, helloHeader bytes at least): it
// covers every byte but the MAC's own.
func (k worldKey) helloMAC(b []byte) mac {
	return k.sum(helloLabel, b[:helloMACAt], b[helloMACAt+macBytes:])
}

// sealHello writes hello b's MAC into it.
func (k worldKey) sealHello(b []byte) { m := k.helloMAC(b); copy(b[helloMACAt:], m[:]) }

// checkHello fails unless hello b (decoded by decodeHello) carries its MAC under k.
func (k worldKey) checkHello(b []byte) error {
	if m := k.helloMAC(b); !hmac.Equal(m[:], b[helloMACAt:helloMACAt+macBytes]) {
		return fmt.Errorf("%w: a hello without this world's MAC", ErrBootstrap)
	}
	return nil
}

// tableDigest is the SHA-256 of table b but its MAC: what the MAC for each rank covers
// with that rank's nonce, so that sealing a large table for every rank hashes it once.
func tableDigest(b []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(b[:tableMACAt])
	h.Write(b[tableMACAt+macBytes:])
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// tableMAC is the MAC of the table of digest d for the rank whose hello had nonce n.
func (k worldKey) tableMAC(d [sha256.Size]byte, n nonce) mac { return k.sum(tableLabel, n[:], d[:]) }

// sealTable writes into table b (of digest d) its MAC for the rank whose nonce is n.
func (k worldKey) sealTable(b []byte, d [sha256.Size]byte, n nonce) {
	m := k.tableMAC(d, n)
	copy(b[tableMACAt:], m[:])
}

// checkTable fails unless table b carries its MAC under k for nonce n: it comes from
// a root that holds the world's secret, for this bootstrap of this rank.
func (k worldKey) checkTable(b []byte, n nonce) error {
	if len(b) < tableHeader {
		return fmt.Errorf("%w: not a table", ErrBootstrap)
	}
	if m := k.tableMAC(tableDigest(b), n); !hmac.Equal(m[:], b[tableMACAt:tableHeader]) {
		return fmt.Errorf("%w: the root does not share this world's secret", ErrBootstrap)
	}
	return nil
}
