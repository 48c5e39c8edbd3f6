package plan

import (
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// decoder is a recursive-descent JSON reader that reads a plan the way MSCCL++'s
// parser (nlohmann json) reads it: keys match exactly (encoding/json's struct
// decoding would also match "Name" to "name"), a repeated key's last value wins,
// unknown keys are skipped, strings must be valid (no raw control characters, no
// lone surrogates), and numbers used as integers must be integral ("2.0" is 2;
// nlohmann would truncate "2.5", Parse rejects it). It builds the plan as it
// reads, so memory stays proportional to the plan, not to the text, and it bounds
// nesting by MaxDepth everywhere, also inside skipped values. (encoding/json's
// Token API would do, at a tenth of the speed.)
type decoder struct {
	data  []byte
	pos   int
	depth int
}

func newDecoder(data []byte) *decoder { return &decoder{data: data} }

func (d *decoder) syntax(w where, format string, args ...any) error {
	return w.errf(ErrMalformed, "JSON syntax error at byte %d: "+format, append([]any{d.pos}, args...)...)
}

// ws skips white space and returns the next byte, or 0 at the end.
func (d *decoder) ws() byte {
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; c {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return c
		}
	}
	return 0
}

// expect consumes byte c after white space.
func (d *decoder) expect(w where, c byte) error {
	if d.ws() != c {
		if d.pos >= len(d.data) {
			return w.errf(ErrMalformed, "unexpected end of JSON")
		}
		return d.syntax(w, "want %q, got %q", c, d.data[d.pos])
	}
	d.pos++
	return nil
}

// end checks that nothing but white space follows the top-level value.
func (d *decoder) end() error {
	if d.ws() != 0 {
		return nowhere.errf(ErrMalformed, "data after the top-level JSON value at byte %d", d.pos)
	}
	return nil
}

// kindAt names the JSON type of the value starting at the current position.
func (d *decoder) kindAt() string {
	switch d.ws() {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case 0:
		return "the end of the text"
	}
	return "a number"
}

func (d *decoder) enter(w where) error {
	d.depth++
	if d.depth > MaxDepth {
		return w.errf(ErrLimit, "JSON nested deeper than %d", MaxDepth)
	}
	return nil
}

// object reads an object, calling field once per key (in text order, repeats
// included) with w extended by the key; field must consume the value. Known keys
// are added to seen.
func (d *decoder) object(w where, seen *fields, field func(key string, w where) error) error {
	if d.ws() != '{' {
		return w.errf(ErrMalformed, "want an object, got %s", d.kindAt())
	}
	d.pos++
	if err := d.enter(w); err != nil {
		return err
	}
	if d.ws() == '}' {
		d.pos++
		d.depth--
		return nil
	}
	for {
		if d.ws() != '"' {
			return d.syntax(w, "want a key")
		}
		key, err := d.key(w)
		if err != nil {
			return err
		}
		if err := d.expect(w, ':'); err != nil {
			return err
		}
		seen.add(key)
		if err := field(key, w.at(key)); err != nil {
			return err
		}
		switch d.ws() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			d.depth--
			return nil
		default:
			return d.syntax(w, "want ',' or '}' after a field")
		}
	}
}

// array reads an array of at most max elements, calling elem for each with w
// extended by its index; elem must consume the element. More than max elements
// is ErrLimit, reported as "more than max <what>".
func (d *decoder) array(w where, max int, what string, elem func(i int, w where) error) error {
	if d.ws() != '[' {
		return w.errf(ErrMalformed, "want an array, got %s", d.kindAt())
	}
	d.pos++
	if err := d.enter(w); err != nil {
		return err
	}
	if d.ws() == ']' {
		d.pos++
		d.depth--
		return nil
	}
	for i := 0; ; i++ {
		if i >= max {
			return w.errf(ErrLimit, "more than %d %s", max, what)
		}
		if err := elem(i, w.idx(i)); err != nil {
			return err
		}
		switch d.ws() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			d.depth--
			return nil
		default:
			return d.syntax(w, "want ',' or ']' after an element")
		}
	}
}

// skip consumes one value of any shape, checking its syntax.
func (d *decoder) skip(w where) error {
	switch d.ws() {
	case '{':
		var none fields
		return d.object(w, &none, func(_ string, w where) error { return d.skip(w) })
	case '[':
		return d.array(w, math.MaxInt, "elements", func(_ int, w where) error { return d.skip(w) })
	case '"':
		_, err := d.string(w)
		return err
	case 't', 'f':
		_, err := d.boolean(w)
		return err
	case 'n':
		return d.literal(w, "null")
	}
	_, err := d.number(w)
	return err
}

// raw consumes one value and returns its text.
func (d *decoder) raw(w where) ([]byte, error) {
	d.ws()
	start := d.pos
	err := d.skip(w)
	return d.data[start:d.pos], err
}

func (d *decoder) literal(w where, lit string) error {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return d.syntax(w, "invalid literal")
	}
	d.pos += len(lit)
	return nil
}

func (d *decoder) boolean(w where) (bool, error) {
	switch d.ws() {
	case 't':
		return true, d.literal(w, "true")
	case 'f':
		return false, d.literal(w, "false")
	}
	return false, w.errf(ErrMalformed, "want true or false, got %s", d.kindAt())
}

// key reads an object key, returning the package's own copy of known keys so
// that reading them allocates nothing.
func (d *decoder) key(w where) (string, error) {
	start := d.pos + 1
	for i := start; i < len(d.data); i++ {
		c := d.data[i]
		if c == '"' {
			if k, ok := keyBits[string(d.data[start:i])]; ok {
				d.pos = i + 1
				return k.name, nil
			}
			break
		}
		if c == '\\' || c < 0x20 {
			break
		}
	}
	return d.string(w)
}

// string reads a string value (the current byte is '"'; the text is valid UTF-8).
func (d *decoder) str(w where) (string, error) {
	if d.ws() != '"' {
		return "", w.errf(ErrMalformed, "want a string, got %s", d.kindAt())
	}
	return d.string(w)
}

func (d *decoder) string(w where) (string, error) {
	d.pos++ // '"'
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			s := string(d.data[start:d.pos])
			d.pos++
			return s, nil
		case c == '\\':
			return d.escaped(w, start)
		case c < 0x20:
			return "", d.syntax(w, "control character in a string")
		}
		d.pos++
	}
	return "", w.errf(ErrMalformed, "unexpected end of JSON in a string")
}

// escaped finishes a string that has escapes, from its start.
func (d *decoder) escaped(w where, start int) (string, error) {
	buf := append([]byte(nil), d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return string(buf), nil
		case c < 0x20:
			return "", d.syntax(w, "control character in a string")
		case c != '\\':
			buf = append(buf, c)
			d.pos++
			continue
		}
		if d.pos+1 >= len(d.data) {
			break
		}
		e := d.data[d.pos+1]
		d.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", d.syntax(w, "bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if d.pos+1 < len(d.data) && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
					d.pos += 2
					r2, ok = d.hex4()
				}
				if r = utf16.DecodeRune(r, r2); !ok || r == utf8.RuneError {
					return "", d.syntax(w, "lone surrogate in a \\u escape")
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", d.syntax(w, "bad escape \\%c", e)
		}
	}
	return "", w.errf(ErrMalformed, "unexpected end of JSON in a string")
}

func (d *decoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d.data[d.pos:d.pos+4]), 16, 32)
	d.pos += 4
	return rune(v), err == nil
}

// number reads a JSON number and returns its text.
func (d *decoder) number(w where) (string, error) {
	start := d.pos
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	if d.pos < len(d.data) && d.data[d.pos] == '-' {
		d.pos++
	}
	lead := d.pos
	if digits() == 0 {
		if d.pos >= len(d.data) {
			return "", w.errf(ErrMalformed, "unexpected end of JSON")
		}
		return "", d.syntax(w, "want a value, got %q", d.data[d.pos])
	}
	if d.data[lead] == '0' && d.pos-lead > 1 {
		return "", d.syntax(w, "number with a leading zero")
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if digits() == 0 {
			return "", d.syntax(w, "no digits after '.'")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return "", d.syntax(w, "no digits in an exponent")
		}
	}
	return string(d.data[start:d.pos]), nil
}

// integral reads a number that is an integer: its sign and magnitude.
func (d *decoder) integral(w where) (neg bool, mag uint64, err error) {
	if c := d.ws(); c != '-' && (c < '0' || c > '9') {
		return false, 0, w.errf(ErrMalformed, "want an integer, got %s", d.kindAt())
	}
	s, err := d.number(w)
	if err != nil {
		return false, 0, err
	}
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '.' || c == 'e' || c == 'E' {
			plain = false
			break
		}
	}
	if plain {
		neg = s[0] == '-'
		digits := s
		if neg {
			digits = s[1:]
		}
		mag, perr := strconv.ParseUint(digits, 10, 64)
		if perr != nil {
			return false, 0, w.errf(ErrOutOfRange, "integer %s does not fit in 64 bits", s)
		}
		return neg && mag != 0, mag, nil
	}
	f, perr := strconv.ParseFloat(s, 64)
	if perr != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<63 {
		return false, 0, w.errf(ErrMalformed, "want an integer, got %s", s)
	}
	if f < 0 {
		return true, uint64(-f), nil
	}
	return false, uint64(f), nil
}

// uint64 reads a non-negative integer up to max.
func (d *decoder) uint64(w where, max uint64) (uint64, error) {
	neg, mag, err := d.integral(w)
	if err != nil {
		return 0, err
	}
	if neg || mag > max {
		return 0, w.errf(ErrOutOfRange, "%s is outside 0..%d", signed(neg, mag), max)
	}
	return mag, nil
}

// int reads an integer in lo..hi (|lo|, |hi| < 2^62).
func (d *decoder) int(w where, lo, hi int) (int, error) {
	neg, mag, err := d.integral(w)
	if err != nil {
		return 0, err
	}
	if mag > 1<<62 {
		return 0, w.errf(ErrOutOfRange, "%s is outside %d..%d", signed(neg, mag), lo, hi)
	}
	v := int(mag)
	if neg {
		v = -v
	}
	if v < lo || v > hi {
		return 0, w.errf(ErrOutOfRange, "%d is outside %d..%d", v, lo, hi)
	}
	return v, nil
}

func signed(neg bool, mag uint64) string {
	if neg {
		return "-" + strconv.FormatUint(mag, 10)
	}
	return strconv.FormatUint(mag, 10)
}

// ints reads an array of at most max integers, each in lo..hi.
func (d *decoder) ints(w where, max int, what string, lo, hi int) ([]int, error) {
	out := []int{}
	err := d.array(w, max, what, func(_ int, w where) error {
		v, err := d.int(w, lo, hi)
		out = append(out, v)
		return err
	})
	return out, err
}

// fields is the set of known keys an object had, for required-field checks.
type fields uint64

// keyBits numbers the keys the package knows, for fields.
var keyBits = func() map[string]struct {
	name string
	bit  fields
} {
	keys := []string{
		"name", "collective", "protocol", "inplace", "reuse_resources", "use_double_scratch_buffer",
		"num_threads_per_block", "buffer_alignment", "min_message_size", "max_message_size", "gpus",
		"id", "input_chunks", "output_chunks", "scratch_chunks", "channels", "remote_buffers", "semaphores",
		"threadblocks", "channel_type", "connected_to", "buffer_type", "rank_groups", "size", "ranks", "rank",
		"type", "access_channel_types", "init_value", "remote_buffer_refs", "ops", "channel_ids", "buff",
		"access_channel_type", "remote_buffer_ids", "src_buff", "dst_buff", "tbg_info", "barrier_id",
		"num_threadblocks", "semaphore_ids", "iter_context", "reduce_op", "buffer_id", "switch_channel_id",
		"index", "tb_id", "tbg_size", "unit_size", "num_chunks",
	}
	m := make(map[string]struct {
		name string
		bit  fields
	}, len(keys))
	for i, k := range keys {
		m[k] = struct {
			name string
			bit  fields
		}{k, 1 << i}
	}
	return m
}()

func (f *fields) add(key string) { *f |= keyBits[key].bit }

func (f fields) has(key string) bool {
	b := keyBits[key].bit
	return b != 0 && f&b != 0
}

// require reports the first of keys that was not seen, as ErrMalformed at w.
func (f fields) require(w where, keys ...string) error {
	for _, k := range keys {
		if !f.has(k) {
			return w.errf(ErrMalformed, "missing required field %q", k)
		}
	}
	return nil
}
