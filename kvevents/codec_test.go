package kvevents

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// The payloads below are written byte by byte to the layout in
// shared/reference/vllm-kv-events.md, so the decoder is checked against the
// format itself, not against this package's encoder.

// cat joins byte pieces; each piece is one msgpack item or header.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// fixstr is the msgpack fixstr form of s (s shorter than 32 bytes).
func fixstr(s string) []byte { return append([]byte{0xa0 | byte(len(s))}, s...) }

// f64 is a msgpack float64 (0xcb and 8 big-endian bytes).
func f64(v float64) []byte {
	return binary.BigEndian.AppendUint64([]byte{0xcb}, math.Float64bits(v))
}

// u64 is a msgpack uint64 (0xcf and 8 big-endian bytes).
func u64(v uint64) []byte { return binary.BigEndian.AppendUint64([]byte{0xcf}, v) }

// i64 is a msgpack int64 (0xd3 and 8 big-endian bytes).
func i64(v int64) []byte { return binary.BigEndian.AppendUint64([]byte{0xd3}, uint64(v)) }

var (
	nilb = []byte{0xc0}
	// storedTwo is a 9-field BlockStored of blocks 1 and 2 (block_size 2, no
	// parent, tokens 10..13) with every optional field nil.
	storedTwo = cat(
		[]byte{0x99}, fixstr("BlockStored"),
		[]byte{0x92, 0x01, 0x02},             // block_hashes [1, 2]
		nilb,                                 // parent_block_hash
		[]byte{0x94, 0x0a, 0x0b, 0x0c, 0x0d}, // token_ids
		[]byte{0x02},                         // block_size
		nilb, nilb, nilb, nilb,               // lora_id, medium, lora_name, extra_keys
	)
	wantStoredTwo = &BlockStored{BlockHashes: []uint64{1, 2}, TokenIDs: []uint32{10, 11, 12, 13}, BlockSize: 2}
)

func i64p(v int64) *int64 { return &v }

func TestDecodeBatchRawFrames(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		want    Batch
	}{
		{
			// [1.5, [BlockStored], nil]
			name:    "the positional form with small int hashes and a nil parent decodes",
			payload: cat([]byte{0x93}, f64(1.5), []byte{0x91}, storedTwo, nilb),
			want:    Batch{TS: 1.5, Events: []Event{wantStoredTwo}},
		},
		{
			name: "full-width unsigned hashes and a parent decode as their uint64 values",
			payload: cat([]byte{0x93}, f64(2), []byte{0x91},
				[]byte{0x96}, fixstr("BlockStored"),
				[]byte{0x91}, u64(0xfedcba9876543210), // block_hashes
				u64(0x0123456789abcdef), // parent
				[]byte{0x92, 0xcd, 0xff, 0xff, 0xce, 0x00, 0x01, 0x86, 0xa0}, // tokens 65535, 100000
				[]byte{0x02}, // block_size
				[]byte{0x07}, // lora_id 7 (an older 6-field event)
				[]byte{0x03}),
			want: Batch{TS: 2, DataParallelRank: i64p(3), Events: []Event{&BlockStored{
				BlockHashes: []uint64{0xfedcba9876543210}, Parent: 0x0123456789abcdef, HasParent: true,
				TokenIDs: []uint32{65535, 100000}, BlockSize: 2, LoraID: i64p(7),
			}}},
		},
		{
			name: "negative signed hashes keep their two's-complement bit pattern",
			payload: cat([]byte{0x92}, f64(0), []byte{0x91},
				[]byte{0x92}, fixstr("BlockRemoved"),
				[]byte{0x93}, i64(-2), []byte{0xff}, []byte{0xd0, 0x80}), // -2, -1 (negative fixint), -128 (int8)
			want: Batch{Events: []Event{&BlockRemoved{BlockHashes: []uint64{
				math.MaxUint64 - 1, math.MaxUint64, math.MaxUint64 - 127,
			}}}},
		},
		{
			name: "a 32-byte digest hash reads its last 8 bytes big-endian, and a short one zero-extends",
			payload: cat([]byte{0x92}, f64(0), []byte{0x91},
				[]byte{0x93}, fixstr("BlockRemoved"),
				[]byte{0x92},
				[]byte{0xc4, 0x20}, bytes.Repeat([]byte{0xaa}, 24), []byte{1, 2, 3, 4, 5, 6, 7, 8},
				[]byte{0xc4, 0x02, 0x01, 0x02},
				fixstr("GPU")),
			want: Batch{Events: []Event{&BlockRemoved{BlockHashes: []uint64{0x0102030405060708, 0x0102}, Medium: "GPU"}}},
		},
		{
			name: "unknown trailing fields in the batch and in events are ignored",
			payload: cat([]byte{0x94}, f64(3), []byte{0x93},
				// BlockStored with 13 fields: 11 known, then an int and a map.
				[]byte{0x9d}, fixstr("BlockStored"),
				[]byte{0x91, 0x05}, []byte{0x04}, []byte{0x91, 0x2a}, []byte{0x01},
				nilb, fixstr("GPU"), fixstr("ad"), []byte{0x90},
				[]byte{0x01}, fixstr("full_attention"),
				[]byte{0x7f}, []byte{0x81, 0xa1, 'k', 0x01},
				// BlockRemoved with group_idx, then a trailing string.
				[]byte{0x95}, fixstr("BlockRemoved"), []byte{0x91, 0x05}, nilb, []byte{0x02}, fixstr("x"),
				// AllBlocksCleared with a trailing nil.
				[]byte{0x92}, fixstr("AllBlocksCleared"), nilb,
				[]byte{0x00}, fixstr("future")), // dp rank 0, then an unknown field
			want: Batch{TS: 3, DataParallelRank: i64p(0), Events: []Event{
				&BlockStored{BlockHashes: []uint64{5}, Parent: 4, HasParent: true, TokenIDs: []uint32{42}, BlockSize: 1, Medium: "GPU", LoraName: "ad",
					GroupIdx: i64p(1), KVCacheSpecKind: "full_attention"},
				&BlockRemoved{BlockHashes: []uint64{5}, GroupIdx: i64p(2)},
				&AllBlocksCleared{},
			}},
		},
		{
			name: "the map form decodes at both levels, with keys in any order and unknown keys ignored",
			payload: cat([]byte{0x84},
				fixstr("events"), []byte{0x92},
				[]byte{0x86},
				fixstr("token_ids"), []byte{0x92, 0x01, 0x02},
				fixstr("type"), fixstr("BlockStored"),
				fixstr("block_size"), []byte{0x02},
				fixstr("block_hashes"), []byte{0x91, 0x09},
				fixstr("parent_block_hash"), nilb,
				fixstr("new_field"), []byte{0x92, 0xc3, 0xc2},
				[]byte{0x82}, fixstr("type"), fixstr("AllBlocksCleared"), fixstr("extra"), nilb,
				fixstr("ts"), f64(9.25),
				fixstr("data_parallel_rank"), []byte{0x01},
				fixstr("schema"), []byte{0x02}),
			want: Batch{TS: 9.25, DataParallelRank: i64p(1), Events: []Event{
				&BlockStored{BlockHashes: []uint64{9}, TokenIDs: []uint32{1, 2}, BlockSize: 2},
				&AllBlocksCleared{},
			}},
		},
		{
			name: "positional and map events may be mixed in one batch",
			payload: cat([]byte{0x92}, f64(0), []byte{0x92},
				storedTwo,
				[]byte{0x83}, fixstr("type"), fixstr("BlockRemoved"), fixstr("block_hashes"), []byte{0x91, 0x02},
				fixstr("medium"), fixstr("CPU")),
			want: Batch{Events: []Event{wantStoredTwo, &BlockRemoved{BlockHashes: []uint64{2}, Medium: "CPU"}}},
		},
		{
			name: "an event of an unknown type is skipped and counted, and the rest still decode",
			payload: cat([]byte{0x92}, f64(0), []byte{0x93},
				[]byte{0x93}, fixstr("BlockMoved"), []byte{0x91, 0x01}, fixstr("CPU"),
				[]byte{0x81}, fixstr("type"), fixstr("Other"),
				storedTwo),
			want: Batch{Events: []Event{wantStoredTwo}, Skipped: 2},
		},
		{
			name:    "a batch with no events decodes to an empty batch",
			payload: cat([]byte{0x93}, f64(4), []byte{0x90}, nilb),
			want:    Batch{TS: 4},
		},
		{
			name:    "an integer timestamp is read as seconds",
			payload: cat([]byte{0x92}, []byte{0xce, 0x65, 0x00, 0x00, 0x00}, []byte{0x90}),
			want:    Batch{TS: 0x65000000},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeBatch(tt.payload)
			if err != nil {
				t.Fatalf("DecodeBatch: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecodeBatch:\n got %s\nwant %s", show(got), show(tt.want))
			}
		})
	}
}

// show prints a batch with its events and optional values dereferenced.
func show(b Batch) string {
	var events []string
	for _, e := range b.Events {
		s := fmt.Sprintf("%+v", e)
		if st, ok := e.(*BlockStored); ok && st.LoraID != nil {
			s += fmt.Sprintf("(lora_id=%d)", *st.LoraID)
		}
		events = append(events, s)
	}
	dp := "nil"
	if b.DataParallelRank != nil {
		dp = fmt.Sprint(*b.DataParallelRank)
	}
	return fmt.Sprintf("ts=%v dp=%s skipped=%d events=%v", b.TS, dp, b.Skipped, events)
}

func TestDecodeBatchSadPath(t *testing.T) {
	head := cat([]byte{0x92}, f64(0), []byte{0x91}) // [0.0, [<one event>]]
	tests := []struct {
		name    string
		payload []byte
		wantErr string // a phrase the one-line error must contain
	}{
		// Whole-payload shape.
		{"an empty payload is truncated", nil, "truncated"},
		{"a bare integer is not a batch", []byte{0x05}, "want an array or a map"},
		{"a batch array without events is rejected", cat([]byte{0x91}, f64(0)), "at least 2"},
		{"a string timestamp is rejected", cat([]byte{0x92}, fixstr("now"), []byte{0x90}), "ts"},
		{"events that are not an array are rejected", cat([]byte{0x92}, f64(0), []byte{0x05}), "events"},
		{"bytes after the batch are rejected", cat([]byte{0x92}, f64(0), []byte{0x90, 0x00}), "left after the batch"},
		{"a map batch without events is rejected", cat([]byte{0x81}, fixstr("ts"), f64(0)), `no "events"`},
		{"a map key that is not a string is rejected", cat([]byte{0x81}, []byte{0x01}, []byte{0x90}), "map key"},
		{"an array claiming 4 billion events is rejected before allocating", cat([]byte{0x92}, f64(0), []byte{0xdd, 0xff, 0xff, 0xff, 0xff}), "exceeds"},
		// Events.
		{"an event that is an integer is rejected", cat(head, []byte{0x01}), "event 0"},
		{"an empty event array has no tag", cat(head, []byte{0x90}), "type tag"},
		{"a tag that is not a string is rejected", cat(head, []byte{0x91, 0x01}), "type tag"},
		{"a map event without a type is rejected", cat(head, []byte{0x81}, fixstr("block_hashes"), []byte{0x90}), `no "type"`},
		{"a BlockStored with too few fields is rejected", cat(head, []byte{0x93}, fixstr("BlockStored"), []byte{0x90}, nilb), "at least 5"},
		{"a BlockRemoved without hashes is rejected", cat(head, []byte{0x91}, fixstr("BlockRemoved")), "at least 2"},
		{"token_ids shorter than blocks × block_size names the field", cat(head,
			[]byte{0x95}, fixstr("BlockStored"), []byte{0x92, 0x01, 0x02}, nilb, []byte{0x93, 0x01, 0x02, 0x03}, []byte{0x02}),
			"token_ids has 3 entries, want 4"},
		{"a zero block_size is rejected", cat(head,
			[]byte{0x95}, fixstr("BlockStored"), []byte{0x90}, nilb, []byte{0x90}, []byte{0x00}), "block_size 0"},
		{"a string block_size is rejected", cat(head,
			[]byte{0x95}, fixstr("BlockStored"), []byte{0x90}, nilb, []byte{0x90}, fixstr("16")), "block_size"},
		{"a negative token id is rejected", cat(head,
			[]byte{0x95}, fixstr("BlockStored"), []byte{0x91, 0x01}, nilb, []byte{0x91, 0xff}, []byte{0x01}), "token 0"},
		{"a token id above uint32 is rejected", cat(head,
			[]byte{0x95}, fixstr("BlockStored"), []byte{0x91, 0x01}, nilb, []byte{0x91}, u64(1<<40), []byte{0x01}), "out of range"},
		{"a nil token id is rejected", cat(head,
			[]byte{0x95}, fixstr("BlockStored"), []byte{0x91, 0x01}, nilb, []byte{0x91}, nilb, []byte{0x01}), "token 0"},
		{"a float hash is rejected", cat(head, []byte{0x92}, fixstr("BlockRemoved"), []byte{0x91}, f64(1)), "hash 0"},
		{"an empty bytes hash is rejected", cat(head, []byte{0x92}, fixstr("BlockRemoved"), []byte{0x91, 0xc4, 0x00}), "empty"},
		{"a string lora_id is rejected", cat(head,
			[]byte{0x96}, fixstr("BlockStored"), []byte{0x90}, nilb, []byte{0x90}, []byte{0x01}, fixstr("a")), "lora_id"},
		{"an integer medium is rejected", cat(head, []byte{0x93}, fixstr("BlockRemoved"), []byte{0x90}, []byte{0x01}), "medium"},
		{"a map BlockStored without token_ids is rejected", cat(head,
			[]byte{0x83}, fixstr("type"), fixstr("BlockStored"), fixstr("block_hashes"), []byte{0x90}, fixstr("block_size"), []byte{0x01}),
			"missing token_ids"},
		{"an ignored field claiming a gigabyte of bytes is rejected without reading it", cat(
			[]byte{0x94}, f64(0), []byte{0x90}, nilb, []byte{0xc6, 0x40, 0x00, 0x00, 0x00}), "exceeds"},
		{"an ignored field nested 40 deep is rejected", cat(
			[]byte{0x94}, f64(0), []byte{0x90}, nilb, bytes.Repeat([]byte{0x91}, 40), nilb), "deeper than 32"},
		{"an ignored msgpack extension is rejected", cat(
			[]byte{0x94}, f64(0), []byte{0x90}, nilb, []byte{0xd4, 0x01, 0x00}), "extension"},
		{"a string claiming more bytes than are left is rejected", cat(head, []byte{0x91, 0xdb, 0x7f, 0xff, 0xff, 0xff}), "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeBatch(tt.payload)
			if err == nil {
				t.Fatalf("DecodeBatch(% x) succeeded, want an error containing %q", tt.payload, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("DecodeBatch error = %q, want one line containing %q", err, tt.wantErr)
			}
		})
	}
}

// Every strict prefix of a valid payload must fail cleanly: a cut frame must
// never decode as a shorter, different batch.
func TestDecodeBatchRejectsEveryTruncation(t *testing.T) {
	full, err := EncodeBatch(sampleBatch())
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(full) {
		if _, err := DecodeBatch(full[:n]); err == nil {
			t.Fatalf("DecodeBatch of the first %d of %d bytes succeeded", n, len(full))
		}
	}
}

func sampleBatch() Batch {
	return Batch{TS: 1732243200.125, DataParallelRank: i64p(2), Events: []Event{
		&BlockStored{BlockHashes: []uint64{math.MaxUint64, 7}, Parent: 1 << 63, HasParent: true,
			TokenIDs: []uint32{1, 200, 70000, math.MaxUint32}, BlockSize: 2, LoraID: i64p(-3), Medium: "GPU", LoraName: "sql"},
		&BlockStored{BlockHashes: []uint64{8}, TokenIDs: []uint32{5, 6}, BlockSize: 2},
		&BlockRemoved{BlockHashes: []uint64{7, 8}, Medium: "GPU"},
		&BlockRemoved{BlockHashes: nil},
		&AllBlocksCleared{},
	}}
}

// TestEncodeBatchReadsWithPlainMsgpack decodes EncodeBatch's output with a
// generic msgpack reader, as a Python or other non-kvlens consumer would,
// and checks the documented positional layout field by field.
func TestEncodeBatchReadsWithPlainMsgpack(t *testing.T) {
	payload, err := EncodeBatch(sampleBatch())
	if err != nil {
		t.Fatal(err)
	}
	if payload[0] != 0x93 || payload[1] != 0xcb {
		t.Fatalf("payload starts % x, want 93 cb: a 3-array whose ts is a float64", payload[:2])
	}
	var v []any
	if err := msgpack.Unmarshal(payload, &v); err != nil {
		t.Fatalf("plain msgpack decode: %v", err)
	}
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", what, got, want)
		}
	}
	check("len(batch)", len(v), 3)
	check("ts", v[0], 1732243200.125)
	check("data_parallel_rank", num(v[2]), int64(2))
	events := v[1].([]any)
	check("len(events)", len(events), 5)

	st := events[0].([]any)
	check("len(BlockStored)", len(st), 9)
	check("tag", st[0], "BlockStored")
	check("block_hashes", nums(st[1]), []int64{-1, 7}) // uint64 max reads back as -1 in int64
	check("block_hashes[0] as uint64", uint64(num(st[1].([]any)[0])), uint64(math.MaxUint64))
	check("parent_block_hash", uint64(num(st[2])), uint64(1<<63))
	check("token_ids", nums(st[3]), []int64{1, 200, 70000, math.MaxUint32})
	check("block_size", num(st[4]), int64(2))
	check("lora_id", num(st[5]), int64(-3))
	check("medium", st[6], "GPU")
	check("lora_name", st[7], "sql")
	check("extra_keys", st[8], nil)

	st2 := events[1].([]any)
	check("second BlockStored parent", st2[2], nil)
	check("second BlockStored lora_id", st2[5], nil)
	check("second BlockStored medium", st2[6], nil)
	check("second BlockStored lora_name", st2[7], nil)

	rm := events[2].([]any)
	check("BlockRemoved", len(rm), 3)
	check("BlockRemoved tag", rm[0], "BlockRemoved")
	check("BlockRemoved hashes", nums(rm[1]), []int64{7, 8})
	check("BlockRemoved medium", rm[2], "GPU")
	check("empty BlockRemoved hashes", nums(events[3].([]any)[1]), []int64{})
	check("AllBlocksCleared", events[4], []any{"AllBlocksCleared"})
}

// num widens any msgpack integer a generic decoder returns to int64.
func num(v any) int64 {
	switch n := v.(type) {
	case int8:
		return int64(n)
	case int16:
		return int64(n)
	case int32:
		return int64(n)
	case int64:
		return n
	case uint8:
		return int64(n)
	case uint16:
		return int64(n)
	case uint32:
		return int64(n)
	case uint64:
		return int64(n)
	}
	panic("not an integer: " + fmt.Sprint(v))
}

func nums(v any) []int64 {
	out := []int64{}
	for _, x := range v.([]any) {
		out = append(out, num(x))
	}
	return out
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	want := sampleBatch()
	payload, err := EncodeBatch(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBatch(payload)
	if err != nil {
		t.Fatal(err)
	}
	want.Events[3] = &BlockRemoved{} // nil and empty hash lists read back alike
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %s\nwant %s", show(got), show(want))
	}
}

func TestEncodeBatchSadPath(t *testing.T) {
	tests := []struct {
		name  string
		batch Batch
	}{
		{"a BlockStored whose token count does not match is refused", Batch{Events: []Event{
			&BlockStored{BlockHashes: []uint64{1}, TokenIDs: []uint32{1}, BlockSize: 2}}}},
		{"a BlockStored with no block size is refused", Batch{Events: []Event{&BlockStored{}}}},
		{"a nil event is refused", Batch{Events: []Event{nil}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := EncodeBatch(tt.batch); err == nil {
				t.Error("EncodeBatch succeeded")
			}
		})
	}
}

func FuzzDecodeBatch(f *testing.F) {
	seed, _ := EncodeBatch(sampleBatch())
	f.Add(seed)
	f.Add(cat([]byte{0x93}, f64(1.5), []byte{0x91}, storedTwo, nilb))
	f.Add(cat([]byte{0x82}, fixstr("ts"), f64(1), fixstr("events"), []byte{0x91},
		[]byte{0x82}, fixstr("type"), fixstr("BlockRemoved"), fixstr("block_hashes"), []byte{0x91, 0xc4, 0x02, 0x01, 0x02}))
	f.Add(cat([]byte{0x92}, f64(0), []byte{0x91}, []byte{0x91}, fixstr("AllBlocksCleared")))
	for _, g := range goldens { // every publisher dialect
		f.Add(g.payload)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		b, err := DecodeBatch(payload)
		slow, slowErr := decodeBatch(payload, false)
		if (err == nil) != (slowErr == nil) {
			t.Fatalf("the fast token path says %v, the library-only path says %v", err, slowErr)
		}
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		if !math.IsNaN(b.TS) && !reflect.DeepEqual(b, slow) {
			t.Fatalf("the fast token path decoded\n%s\nthe library-only path\n%s", show(b), show(slow))
		}
		again, err := EncodeBatch(b)
		if err != nil {
			t.Fatalf("re-encoding a decoded batch: %v", err)
		}
		b2, err := DecodeBatch(again)
		if err != nil {
			t.Fatalf("decoding the re-encoded batch: %v", err)
		}
		b.Skipped = 0 // the encoder writes only known events
		if !math.IsNaN(b.TS) && !reflect.DeepEqual(b, b2) {
			t.Fatalf("decode → encode → decode changed the batch:\n got %s\nwant %s", show(b2), show(b))
		}
		if third, _ := EncodeBatch(b2); !bytes.Equal(third, again) {
			t.Fatalf("encoding is not stable:\n% x\n% x", again, third)
		}
	})
}

// benchBatches are realistic step batches: 16 blocks of 32 tokens stored
// with ids in cl100k's range, and 16 blocks evicted, both with full 64-bit
// hashes.
func benchBatches() (stored, removed Batch) {
	rng := rand.New(rand.NewPCG(1, 2))
	const blocks, size = 16, 32
	st := &BlockStored{BlockSize: size, HasParent: true, Parent: rng.Uint64(), Medium: "GPU"}
	rm := &BlockRemoved{Medium: "GPU"}
	for range blocks {
		st.BlockHashes = append(st.BlockHashes, rng.Uint64())
		rm.BlockHashes = append(rm.BlockHashes, rng.Uint64())
		for range size {
			st.TokenIDs = append(st.TokenIDs, uint32(rng.IntN(100_256)))
		}
	}
	return Batch{TS: 1732243200.5, Events: []Event{st}}, Batch{TS: 1732243200.5, Events: []Event{rm}}
}

// BenchmarkDecodeBatch measures DecodeBatch in blocks per second against two
// baselines on the same payload: the same decoder with every token id read
// through the msgpack library (no unsignedRun), and a generic
// msgpack.Unmarshal into []any, which builds the tree but decodes nothing.
func BenchmarkDecodeBatch(b *testing.B) {
	stored, removed := benchBatches()
	for _, c := range []struct {
		name  string
		batch Batch
	}{{"BlockStored16x32", stored}, {"BlockRemoved16", removed}} {
		payload, err := EncodeBatch(c.batch)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				if _, err := DecodeBatch(payload); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(16*float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
		})
		if c.name == "BlockStored16x32" {
			b.Run(c.name+"/map-form", func(b *testing.B) {
				payload := mapForm(b, c.batch)
				b.ReportAllocs()
				b.SetBytes(int64(len(payload)))
				for b.Loop() {
					if _, err := DecodeBatch(payload); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(16*float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
			})
		}
		b.Run(c.name+"/baseline=library-only", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				if _, err := decodeBatch(payload, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(16*float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
		})
		b.Run(c.name+"/baseline=generic-unmarshal", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				var v []any
				if err := msgpack.Unmarshal(payload, &v); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(16*float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
		})
	}
}

// mapForm writes a batch of one BlockStored in newer vLLM's map form, with
// the generic msgpack encoder.
func mapForm(b *testing.B, batch Batch) []byte {
	st := batch.Events[0].(*BlockStored)
	payload, err := msgpack.Marshal(map[string]any{
		"ts": batch.TS, "data_parallel_rank": nil,
		"events": []any{map[string]any{
			"type": "BlockStored", "block_hashes": st.BlockHashes, "parent_block_hash": st.Parent,
			"token_ids": st.TokenIDs, "block_size": st.BlockSize, "medium": st.Medium,
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return payload
}

func BenchmarkEncodeBatch(b *testing.B) {
	stored, _ := benchBatches()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeBatch(stored); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(16*float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
}
