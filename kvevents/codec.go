package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Event tags as vLLM writes them: the first element of a positional event,
// or the "type" value of a map event.
const (
	tagBlockStored      = "BlockStored"
	tagBlockRemoved     = "BlockRemoved"
	tagAllBlocksCleared = "AllBlocksCleared"
)

var encoders = sync.Pool{New: func() any {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	return &encoder{buf: &buf, e: e}
}}

type encoder struct {
	buf *bytes.Buffer
	e   *msgpack.Encoder
}

// EncodeBatch writes b in vLLM's positional msgpack form:
//
//	[ts float64, [event, ...], data_parallel_rank int|nil]
//	["BlockStored", block_hashes, parent|nil, token_ids, block_size, lora_id|nil, medium|nil, lora_name|nil, extra_keys]
//	["BlockRemoved", block_hashes, medium|nil]
//	["AllBlocksCleared"]
//
// Hashes and token ids are written as the smallest msgpack unsigned integer
// that holds them, as Python's msgpack does for a non-negative int; extra_keys
// is always nil. Empty Medium and LoraName are written as nil.
func EncodeBatch(b Batch) ([]byte, error) {
	enc := encoders.Get().(*encoder)
	defer encoders.Put(enc)
	enc.buf.Reset()
	if err := encodeBatch(enc.e, b); err != nil {
		return nil, fmt.Errorf("kvevents: encode batch: %w", err)
	}
	return bytes.Clone(enc.buf.Bytes()), nil
}

func encodeBatch(e *msgpack.Encoder, b Batch) error {
	if err := e.EncodeArrayLen(3); err != nil {
		return err
	}
	if err := e.EncodeFloat64(b.TS); err != nil {
		return err
	}
	if err := e.EncodeArrayLen(len(b.Events)); err != nil {
		return err
	}
	for i, ev := range b.Events {
		if err := encodeEvent(e, ev); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return encodeOptInt(e, b.DataParallelRank)
}

func encodeEvent(e *msgpack.Encoder, ev Event) error {
	switch ev := ev.(type) {
	case *BlockStored:
		if ev.BlockSize <= 0 {
			return fmt.Errorf("BlockStored: block_size %d is not positive", ev.BlockSize)
		}
		if len(ev.TokenIDs) != len(ev.BlockHashes)*ev.BlockSize {
			return fmt.Errorf("BlockStored: token_ids has %d entries, want %d blocks × %d",
				len(ev.TokenIDs), len(ev.BlockHashes), ev.BlockSize)
		}
		// The group fields follow extra_keys only when set, as msgspec
		// omits trailing defaults.
		fields := 9
		if ev.GroupIdx != nil || ev.KVCacheSpecKind != "" {
			fields = 11
		}
		if err := e.EncodeArrayLen(fields); err != nil {
			return err
		}
		if err := e.EncodeString(tagBlockStored); err != nil {
			return err
		}
		if err := encodeHashes(e, ev.BlockHashes); err != nil {
			return err
		}
		var err error
		if ev.HasParent {
			err = e.EncodeUint(ev.Parent)
		} else {
			err = e.EncodeNil()
		}
		if err != nil {
			return err
		}
		if err := e.EncodeArrayLen(len(ev.TokenIDs)); err != nil {
			return err
		}
		for _, t := range ev.TokenIDs {
			if err := e.EncodeUint(uint64(t)); err != nil {
				return err
			}
		}
		if err := e.EncodeUint(uint64(ev.BlockSize)); err != nil {
			return err
		}
		if err := encodeOptInt(e, ev.LoraID); err != nil {
			return err
		}
		if err := encodeOptString(e, ev.Medium); err != nil {
			return err
		}
		if err := encodeOptString(e, ev.LoraName); err != nil {
			return err
		}
		if err := e.EncodeNil(); err != nil { // extra_keys
			return err
		}
		if fields == 9 {
			return nil
		}
		if err := encodeOptInt(e, ev.GroupIdx); err != nil {
			return err
		}
		return encodeOptString(e, ev.KVCacheSpecKind)
	case *BlockRemoved:
		fields := 3
		if ev.GroupIdx != nil {
			fields = 4
		}
		if err := e.EncodeArrayLen(fields); err != nil {
			return err
		}
		if err := e.EncodeString(tagBlockRemoved); err != nil {
			return err
		}
		if err := encodeHashes(e, ev.BlockHashes); err != nil {
			return err
		}
		if err := encodeOptString(e, ev.Medium); err != nil {
			return err
		}
		if fields == 3 {
			return nil
		}
		return encodeOptInt(e, ev.GroupIdx)
	case *AllBlocksCleared:
		fields := 1
		if ev.Medium != "" {
			fields = 2
		}
		if err := e.EncodeArrayLen(fields); err != nil {
			return err
		}
		if err := e.EncodeString(tagAllBlocksCleared); err != nil {
			return err
		}
		if fields == 1 {
			return nil
		}
		return e.EncodeString(ev.Medium)
	default:
		return fmt.Errorf("unknown event type %T", ev)
	}
}

func encodeHashes(e *msgpack.Encoder, hs []uint64) error {
	if err := e.EncodeArrayLen(len(hs)); err != nil {
		return err
	}
	for _, h := range hs {
		if err := e.EncodeUint(h); err != nil {
			return err
		}
	}
	return nil
}

func encodeOptInt(e *msgpack.Encoder, v *int64) error {
	if v == nil {
		return e.EncodeNil()
	}
	return e.EncodeInt(*v)
}

func encodeOptString(e *msgpack.Encoder, s string) error {
	if s == "" {
		return e.EncodeNil()
	}
	return e.EncodeString(s)
}

// decoder is a pooled msgpack stream decoder over an in-memory payload.
// Reading from a bytes.Reader lets it bound every declared length by the
// bytes actually left, so a hostile length cannot force a huge allocation.
type decoder struct {
	fast    bool // read runs of unsigned token ids directly; see unsignedRun
	payload []byte
	r       bytes.Reader
	d       *msgpack.Decoder
	scratch []byte // holds a string or bytes hash while it is looked at
}

var decoders = sync.Pool{New: func() any {
	return &decoder{d: msgpack.NewDecoder(nil)}
}}

// DecodeBatch reads one vLLM event-batch payload. It accepts the positional
// form EncodeBatch writes and the map form of newer vLLM
// ({"ts":..,"events":..,"data_parallel_rank":..}, events keyed by "type"),
// at both levels and mixed. Hashes may be signed or unsigned integers, kept as
// their 64-bit two's-complement pattern, or byte strings, of which the last 8
// bytes are read big-endian (shorter strings are zero-extended on the left).
// Unknown trailing fields and unknown map keys are ignored; events of an
// unknown type are skipped and counted in Batch.Skipped. A BlockStored whose
// token_ids is not len(block_hashes) × block_size long is an error.
func DecodeBatch(payload []byte) (Batch, error) {
	return decodeBatch(payload, true)
}

// decodeBatch is DecodeBatch with unsignedRun switchable, so tests can check
// it against, and benchmarks measure it against, the library-only path.
func decodeBatch(payload []byte, fast bool) (Batch, error) {
	dec := decoders.Get().(*decoder)
	dec.fast = fast
	dec.payload = payload
	dec.r.Reset(payload)
	dec.d.Reset(&dec.r)
	b, err := dec.batch()
	dec.d.Reset(nil)
	dec.r.Reset(nil)
	dec.payload = nil
	if err != nil {
		// Not pooled: a malformed payload may have left the msgpack
		// decoder's internal buffer grown.
		return Batch{}, fmt.Errorf("kvevents: decode batch: %w", err)
	}
	decoders.Put(dec)
	return b, nil
}

func (dec *decoder) batch() (Batch, error) {
	var b Batch
	c, err := dec.d.PeekCode()
	if err != nil {
		return b, errTruncated(err)
	}
	switch {
	case isArray(c):
		n, err := dec.len(dec.d.DecodeArrayLen())
		if err != nil {
			return b, fmt.Errorf("batch: %w", err)
		}
		if n < 2 {
			return b, fmt.Errorf("batch: array has %d fields, want at least 2 (ts, events)", n)
		}
		if b.TS, err = dec.d.DecodeFloat64(); err != nil {
			return b, fmt.Errorf("batch: ts: %w", errTruncated(err))
		}
		if err := dec.events(&b); err != nil {
			return b, err
		}
		if n >= 3 {
			if b.DataParallelRank, err = dec.optInt(); err != nil {
				return b, fmt.Errorf("batch: data_parallel_rank: %w", err)
			}
		}
		if err := dec.skip(n - 3); err != nil {
			return b, fmt.Errorf("batch: trailing fields: %w", err)
		}
	case isMap(c):
		n, err := dec.len(dec.d.DecodeMapLen())
		if err != nil {
			return b, fmt.Errorf("batch: %w", err)
		}
		sawEvents := false
		for range n {
			key, err := dec.key()
			if err != nil {
				return b, fmt.Errorf("batch: %w", err)
			}
			switch key {
			case "ts":
				if b.TS, err = dec.d.DecodeFloat64(); err != nil {
					return b, fmt.Errorf("batch: ts: %w", errTruncated(err))
				}
			case "events":
				sawEvents = true
				if err := dec.events(&b); err != nil {
					return b, err
				}
			case "data_parallel_rank":
				if b.DataParallelRank, err = dec.optInt(); err != nil {
					return b, fmt.Errorf("batch: data_parallel_rank: %w", err)
				}
			default:
				if err := dec.skip(1); err != nil {
					return b, fmt.Errorf("batch: field %q: %w", key, err)
				}
			}
		}
		if !sawEvents {
			return b, errors.New(`batch: map has no "events" field`)
		}
	default:
		return b, fmt.Errorf("batch: got msgpack code 0x%02x, want an array or a map", c)
	}
	if rest := dec.r.Len(); rest != 0 {
		return b, fmt.Errorf("batch: %d bytes left after the batch", rest)
	}
	return b, nil
}

func (dec *decoder) events(b *Batch) error {
	n, err := dec.len(dec.d.DecodeArrayLen())
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	if n > 0 {
		b.Events = make([]Event, 0, n)
	}
	for i := range n {
		ev, err := dec.event()
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		if ev == nil {
			b.Skipped++
			continue
		}
		b.Events = append(b.Events, ev)
	}
	if len(b.Events) == 0 {
		b.Events = nil
	}
	return nil
}

// event reads one event in either form; it returns nil, nil for an event of
// an unknown type, which it has skipped.
func (dec *decoder) event() (Event, error) {
	c, err := dec.d.PeekCode()
	if err != nil {
		return nil, errTruncated(err)
	}
	switch {
	case isArray(c):
		return dec.arrayEvent()
	case isMap(c):
		return dec.mapEvent()
	default:
		return nil, fmt.Errorf("got msgpack code 0x%02x, want an array or a map", c)
	}
}

func (dec *decoder) arrayEvent() (Event, error) {
	n, err := dec.len(dec.d.DecodeArrayLen())
	if err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, errors.New("empty event array, want a type tag first")
	}
	tag, err := dec.str()
	if err != nil {
		return nil, fmt.Errorf("type tag: %w", err)
	}
	switch tag {
	case tagBlockStored:
		// block_hashes, parent, token_ids and block_size are required; older
		// vLLM stops there or after lora_id.
		if n < 5 {
			return nil, fmt.Errorf("BlockStored has %d fields, want at least 5", n)
		}
		ev := &BlockStored{}
		if ev.BlockHashes, err = dec.hashes(); err != nil {
			return nil, fmt.Errorf("BlockStored: block_hashes: %w", err)
		}
		if err := dec.parent(ev); err != nil {
			return nil, err
		}
		if ev.TokenIDs, err = dec.tokens(); err != nil {
			return nil, fmt.Errorf("BlockStored: token_ids: %w", err)
		}
		if ev.BlockSize, err = dec.blockSize(); err != nil {
			return nil, err
		}
		// Optional fields, in order, each present only if the array is long
		// enough: lora_id, medium, lora_name, extra_keys (skipped: the
		// router hashes token ids itself), group_idx, kv_cache_spec_kind.
		// Anything after is ignored.
		if n > 5 {
			if ev.LoraID, err = dec.optInt(); err != nil {
				return nil, fmt.Errorf("BlockStored: lora_id: %w", err)
			}
		}
		if n > 6 {
			if ev.Medium, err = dec.optStr(); err != nil {
				return nil, fmt.Errorf("BlockStored: medium: %w", err)
			}
		}
		if n > 7 {
			if ev.LoraName, err = dec.optStr(); err != nil {
				return nil, fmt.Errorf("BlockStored: lora_name: %w", err)
			}
		}
		if err := dec.skip(min(n, 9) - 8); err != nil {
			return nil, fmt.Errorf("BlockStored: extra_keys: %w", err)
		}
		if n > 9 {
			if ev.GroupIdx, err = dec.optInt(); err != nil {
				return nil, fmt.Errorf("BlockStored: group_idx: %w", err)
			}
		}
		if n > 10 {
			if ev.KVCacheSpecKind, err = dec.optStr(); err != nil {
				return nil, fmt.Errorf("BlockStored: kv_cache_spec_kind: %w", err)
			}
		}
		if err := dec.skip(n - 11); err != nil {
			return nil, fmt.Errorf("BlockStored: trailing fields: %w", err)
		}
		return ev, ev.check()
	case tagBlockRemoved:
		if n < 2 {
			return nil, fmt.Errorf("BlockRemoved has %d fields, want at least 2", n)
		}
		ev := &BlockRemoved{}
		if ev.BlockHashes, err = dec.hashes(); err != nil {
			return nil, fmt.Errorf("BlockRemoved: block_hashes: %w", err)
		}
		if n >= 3 {
			if ev.Medium, err = dec.optStr(); err != nil {
				return nil, fmt.Errorf("BlockRemoved: medium: %w", err)
			}
		}
		if n >= 4 {
			if ev.GroupIdx, err = dec.optInt(); err != nil {
				return nil, fmt.Errorf("BlockRemoved: group_idx: %w", err)
			}
		}
		if err := dec.skip(n - 4); err != nil {
			return nil, fmt.Errorf("BlockRemoved: trailing fields: %w", err)
		}
		return ev, nil
	case tagAllBlocksCleared:
		ev := &AllBlocksCleared{}
		if n >= 2 {
			if ev.Medium, err = dec.optStr(); err != nil {
				return nil, fmt.Errorf("AllBlocksCleared: medium: %w", err)
			}
		}
		if err := dec.skip(n - 2); err != nil {
			return nil, fmt.Errorf("AllBlocksCleared: trailing fields: %w", err)
		}
		return ev, nil
	default:
		if err := dec.skip(n - 1); err != nil {
			return nil, fmt.Errorf("unknown event %q: %w", tag, err)
		}
		return nil, nil
	}
}

// mapEvent reads a map-form event. Keys may come in any order, so the fields
// are collected first and the type decides which of them mean something.
func (dec *decoder) mapEvent() (Event, error) {
	n, err := dec.len(dec.d.DecodeMapLen())
	if err != nil {
		return nil, err
	}
	var (
		tag                           string
		st                            BlockStored
		sawHashes, sawTokens, sawSize bool
	)
	for range n {
		key, err := dec.key()
		if err != nil {
			return nil, err
		}
		switch key {
		case "type":
			if tag, err = dec.str(); err != nil {
				return nil, fmt.Errorf("type: %w", err)
			}
		case "block_hashes":
			sawHashes = true
			if st.BlockHashes, err = dec.hashes(); err != nil {
				return nil, fmt.Errorf("block_hashes: %w", err)
			}
		case "parent_block_hash":
			if err := dec.parent(&st); err != nil {
				return nil, err
			}
		case "token_ids":
			sawTokens = true
			if st.TokenIDs, err = dec.tokens(); err != nil {
				return nil, fmt.Errorf("token_ids: %w", err)
			}
		case "block_size":
			sawSize = true
			if st.BlockSize, err = dec.blockSize(); err != nil {
				return nil, err
			}
		case "lora_id":
			if st.LoraID, err = dec.optInt(); err != nil {
				return nil, fmt.Errorf("lora_id: %w", err)
			}
		case "medium":
			if st.Medium, err = dec.optStr(); err != nil {
				return nil, fmt.Errorf("medium: %w", err)
			}
		case "lora_name":
			if st.LoraName, err = dec.optStr(); err != nil {
				return nil, fmt.Errorf("lora_name: %w", err)
			}
		case "group_idx":
			if st.GroupIdx, err = dec.optInt(); err != nil {
				return nil, fmt.Errorf("group_idx: %w", err)
			}
		case "kv_cache_spec_kind":
			if st.KVCacheSpecKind, err = dec.optStr(); err != nil {
				return nil, fmt.Errorf("kv_cache_spec_kind: %w", err)
			}
		default:
			if err := dec.skip(1); err != nil {
				return nil, fmt.Errorf("field %q: %w", key, err)
			}
		}
	}
	switch tag {
	case tagBlockStored:
		for _, f := range []struct {
			saw  bool
			name string
		}{{sawHashes, "block_hashes"}, {sawTokens, "token_ids"}, {sawSize, "block_size"}} {
			if !f.saw {
				return nil, fmt.Errorf("BlockStored: missing %s", f.name)
			}
		}
		return &st, st.check()
	case tagBlockRemoved:
		if !sawHashes {
			return nil, errors.New("BlockRemoved: missing block_hashes")
		}
		return &BlockRemoved{BlockHashes: st.BlockHashes, Medium: st.Medium, GroupIdx: st.GroupIdx}, nil
	case tagAllBlocksCleared:
		return &AllBlocksCleared{Medium: st.Medium}, nil
	case "":
		return nil, errors.New(`map event has no "type" field`)
	default:
		return nil, nil
	}
}

// check validates what the wire format promises about a BlockStored.
func (ev *BlockStored) check() error {
	if want := len(ev.BlockHashes) * ev.BlockSize; len(ev.TokenIDs) != want {
		return fmt.Errorf("BlockStored: token_ids has %d entries, want %d (%d block_hashes × block_size %d)",
			len(ev.TokenIDs), want, len(ev.BlockHashes), ev.BlockSize)
	}
	return nil
}

func (dec *decoder) parent(ev *BlockStored) error {
	c, err := dec.d.PeekCode()
	if err != nil {
		return fmt.Errorf("BlockStored: parent_block_hash: %w", errTruncated(err))
	}
	if c == msgpcode.Nil {
		ev.Parent, ev.HasParent = 0, false
		return dec.d.DecodeNil()
	}
	if ev.Parent, err = dec.hash(); err != nil {
		return fmt.Errorf("BlockStored: parent_block_hash: %w", err)
	}
	ev.HasParent = true
	return nil
}

func (dec *decoder) blockSize() (int, error) {
	c, err := dec.d.PeekCode()
	if err != nil {
		return 0, fmt.Errorf("BlockStored: block_size: %w", errTruncated(err))
	}
	if !isInt(c) {
		return 0, fmt.Errorf("BlockStored: block_size: got msgpack code 0x%02x, want an integer", c)
	}
	n, err := dec.d.DecodeInt64()
	if err != nil {
		return 0, fmt.Errorf("BlockStored: block_size: %w", errTruncated(err))
	}
	if n <= 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("BlockStored: block_size %d is out of range", n)
	}
	return int(n), nil
}

func (dec *decoder) hashes() ([]uint64, error) {
	n, err := dec.len(dec.d.DecodeArrayLen())
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, nil
	}
	hs := make([]uint64, n)
	for i := range hs {
		if hs[i], err = dec.hash(); err != nil {
			return nil, fmt.Errorf("hash %d: %w", i, err)
		}
	}
	return hs, nil
}

// hash reads one block hash: an integer of any width and sign, or a byte
// string whose last 8 bytes are the value, big-endian.
func (dec *decoder) hash() (uint64, error) {
	c, err := dec.d.PeekCode()
	if err != nil {
		return 0, errTruncated(err)
	}
	switch {
	case isInt(c):
		h, err := dec.d.DecodeUint64()
		return h, errTruncated(err)
	case isBytes(c):
		n, err := dec.len(dec.d.DecodeBytesLen())
		if err != nil {
			return 0, err
		}
		if n <= 0 {
			return 0, errors.New("empty byte-string hash")
		}
		raw, err := dec.read(n)
		if err != nil {
			return 0, err
		}
		if len(raw) > 8 {
			raw = raw[len(raw)-8:]
		}
		var be [8]byte
		copy(be[8-len(raw):], raw)
		return binary.BigEndian.Uint64(be[:]), nil
	default:
		return 0, fmt.Errorf("got msgpack code 0x%02x, want an integer or bytes", c)
	}
}

// tokens reads token_ids. It is the hot loop of decoding: a BlockStored
// carries block_size token ids per block, against one hash.
func (dec *decoder) tokens() ([]uint32, error) {
	n, err := dec.len(dec.d.DecodeArrayLen())
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, nil
	}
	ts := make([]uint32, n)
	i := 0
	if dec.fast {
		i = dec.unsignedRun(ts)
	}
	for ; i < len(ts); i++ {
		// No PeekCode here: DecodeInt64 already rejects every non-integer
		// code but nil, which it reads as 0, so only a 0 needs a second look.
		t, err := dec.d.DecodeInt64()
		if err != nil {
			return nil, fmt.Errorf("token %d: %w", i, errTruncated(err))
		}
		if t < 0 || t > math.MaxUint32 {
			return nil, fmt.Errorf("token %d: %d is out of range", i, t)
		}
		if t == 0 && dec.last() == msgpcode.Nil {
			return nil, fmt.Errorf("token %d: got nil, want an integer", i)
		}
		ts[i] = uint32(t)
	}
	return ts, nil
}

// unsignedRun fills ts from the leading run of the msgpack unsigned integer
// forms an encoder writes for token ids (positive fixint, uint8, uint16,
// uint32), reading the payload directly, and returns how many it filled.
// It stops at the first other code and leaves the reader there, so every
// other form, and every error, still goes through the msgpack library. It
// exists because the library's per-integer cost (three interface calls for a
// uint16) made token ids 90% of decoding time; see BenchmarkDecodeBatch.
func (dec *decoder) unsignedRun(ts []uint32) int {
	p := dec.payload
	pos := len(p) - dec.r.Len()
	i := 0
loop:
	for ; i < len(ts) && pos < len(p); i++ {
		switch c := p[pos]; {
		case c <= msgpcode.PosFixedNumHigh:
			ts[i] = uint32(c)
			pos++
		case c == msgpcode.Uint8 && pos+2 <= len(p):
			ts[i] = uint32(p[pos+1])
			pos += 2
		case c == msgpcode.Uint16 && pos+3 <= len(p):
			ts[i] = uint32(binary.BigEndian.Uint16(p[pos+1:]))
			pos += 3
		case c == msgpcode.Uint32 && pos+5 <= len(p):
			ts[i] = binary.BigEndian.Uint32(p[pos+1:])
			pos += 5
		default:
			break loop
		}
	}
	// The msgpack decoder reads straight from dec.r (a bytes.Reader is
	// already buffered), so moving dec.r moves the decoder.
	dec.r.Seek(int64(pos), io.SeekStart)
	return i
}

func (dec *decoder) optInt() (*int64, error) {
	c, err := dec.d.PeekCode()
	if err != nil {
		return nil, errTruncated(err)
	}
	if c == msgpcode.Nil {
		return nil, dec.d.DecodeNil()
	}
	if !isInt(c) {
		return nil, fmt.Errorf("got msgpack code 0x%02x, want an integer or nil", c)
	}
	v, err := dec.d.DecodeInt64()
	if err != nil {
		return nil, errTruncated(err)
	}
	return &v, nil
}

func (dec *decoder) optStr() (string, error) {
	c, err := dec.d.PeekCode()
	if err != nil {
		return "", errTruncated(err)
	}
	if c == msgpcode.Nil {
		return "", dec.d.DecodeNil()
	}
	return dec.str()
}

// str reads a string, or a byte string holding one (Python's bytes). The
// strings the format repeats in every event (tags, keys, "GPU") come back as
// constants, so they cost no allocation.
func (dec *decoder) str() (string, error) {
	c, err := dec.d.PeekCode()
	if err != nil {
		return "", errTruncated(err)
	}
	if !isBytes(c) {
		return "", fmt.Errorf("got msgpack code 0x%02x, want a string", c)
	}
	n, err := dec.len(dec.d.DecodeBytesLen())
	if err != nil {
		return "", err
	}
	raw, err := dec.read(n)
	if err != nil {
		return "", err
	}
	return intern(raw), nil
}

// intern returns the constant for a string the format repeats, or a copy.
func intern(b []byte) string {
	switch string(b) {
	case tagBlockStored:
		return tagBlockStored
	case tagBlockRemoved:
		return tagBlockRemoved
	case tagAllBlocksCleared:
		return tagAllBlocksCleared
	}
	for _, k := range knownStrings {
		if string(b) == k {
			return k
		}
	}
	return string(b)
}

var knownStrings = [...]string{
	"type", "ts", "events", "data_parallel_rank",
	"block_hashes", "parent_block_hash", "token_ids", "block_size",
	"lora_id", "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind",
	"kv_cache_spec_sliding_window", "GPU", "CPU", "full_attention",
}

// key reads a map key, which must be a string.
func (dec *decoder) key() (string, error) {
	k, err := dec.str()
	if err != nil {
		return "", fmt.Errorf("map key: %w", err)
	}
	return k, nil
}

// last returns the payload byte the decoder consumed last.
func (dec *decoder) last() byte {
	return dec.payload[len(dec.payload)-dec.r.Len()-1]
}

// read reads n raw bytes into the decoder's scratch buffer, valid until the
// next read.
func (dec *decoder) read(n int) ([]byte, error) {
	if n < 0 {
		n = 0 // a nil string
	}
	var raw []byte
	switch {
	case n <= cap(dec.scratch):
		raw = dec.scratch[:n]
	case n <= 4096:
		dec.scratch = make([]byte, n)
		raw = dec.scratch
	default:
		raw = make([]byte, n) // rare; not kept, so a pooled decoder stays small
	}
	if err := dec.d.ReadFull(raw); err != nil {
		return nil, errTruncated(err)
	}
	return raw, nil
}

// len checks a declared array, map or string length against the bytes left:
// every element takes at least one byte, so a larger count is a lie.
func (dec *decoder) len(n int, err error) (int, error) {
	if err != nil {
		return 0, errTruncated(err)
	}
	if n > dec.r.Len() {
		return 0, fmt.Errorf("length %d exceeds the %d bytes left", n, dec.r.Len())
	}
	return n, nil
}

// skip steps over n values the decoder does not use.
func (dec *decoder) skip(n int) error {
	for range n {
		if err := dec.skipValue(0); err != nil {
			return err
		}
	}
	return nil
}

// maxSkipDepth bounds how deeply nested an ignored value may be.
const maxSkipDepth = 32

// skipValue steps over one value. It does the containers and byte strings
// itself, rather than through the library's Skip, to check each declared
// length against the bytes left before acting on it: the library would
// allocate up to 1 MB to skip a 5-byte header claiming a gigabyte, and
// recurse as deep as a payload of nested array headers goes. The format has
// no use for msgpack extensions, so an ignored one is an error too.
func (dec *decoder) skipValue(depth int) error {
	if depth > maxSkipDepth {
		return fmt.Errorf("ignored value nested deeper than %d", maxSkipDepth)
	}
	c, err := dec.d.PeekCode()
	if err != nil {
		return errTruncated(err)
	}
	switch {
	case isArray(c), isMap(c):
		var n int
		if isArray(c) {
			n, err = dec.len(dec.d.DecodeArrayLen())
		} else {
			n, err = dec.len(dec.d.DecodeMapLen())
			n *= 2
		}
		if err != nil {
			return err
		}
		for range n {
			if err := dec.skipValue(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case isBytes(c):
		n, err := dec.len(dec.d.DecodeBytesLen())
		if err != nil {
			return err
		}
		_, err = dec.r.Seek(int64(max(n, 0)), io.SeekCurrent)
		return err
	case msgpcode.IsExt(c):
		return fmt.Errorf("got msgpack extension 0x%02x, which the format does not use", c)
	default:
		return errTruncated(dec.d.Skip()) // a scalar of fixed size
	}
}

// errTruncated names a payload that ends early, which the msgpack decoder
// reports as a bare io.EOF.
func errTruncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("payload truncated")
	}
	return err
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isInt(c byte) bool {
	return msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64)
}

func isBytes(c byte) bool {
	return msgpcode.IsString(c) || msgpcode.IsBin(c)
}
