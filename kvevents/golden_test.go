package kvevents

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the frames built in golden_test.go")

// The golden frames are event-batch payloads as each publisher dialect
// writes them, built here byte by byte from the published format (vLLM's
// msgspec structs: tagged, array_like or not, trailing defaults omitted) and
// kept in testdata/golden/<name>.msgpack. They are not written with this
// package's encoder, so the decoder is held to the format, not to itself.

// str8 is a msgpack str8 (0xd9, a length byte, the bytes), for strings of
// 32 bytes or more.
func str8(s string) []byte { return append([]byte{0xd9, byte(len(s))}, s...) }

// bin8 is a msgpack bin8 (0xc4, a length byte, the bytes): Python bytes.
func bin8(b []byte) []byte { return append([]byte{0xc4, byte(len(b))}, b...) }

// digest is a 32-byte SHA-256-sized hash whose last 8 bytes are v.
func digest(v uint64) []byte {
	d := bytes.Repeat([]byte{0xee}, 24)
	return binary.BigEndian.AppendUint64(d, v)
}

// tokens4 and tokens2 are token_ids 1..4 and 1..2 as positive fixints.
var (
	tokens4 = []byte{0x94, 0x01, 0x02, 0x03, 0x04}
	tokens2 = []byte{0x92, 0x01, 0x02}
)

var goldens = []struct {
	name    string
	payload []byte
	want    Batch
}{
	{
		// vLLM 0.8/0.9: EventBatch [ts, events] with no data_parallel_rank,
		// BlockStored of 6 fields (up to lora_id), BlockRemoved of 2.
		name: "array_old",
		payload: cat([]byte{0x92}, f64(1700000000.25), []byte{0x93},
			[]byte{0x96}, fixstr("BlockStored"), []byte{0x92, 0x0b, 0x0c}, nilb, tokens4, []byte{0x02}, nilb,
			[]byte{0x92}, fixstr("BlockRemoved"), []byte{0x91, 0x0b},
			[]byte{0x91}, fixstr("AllBlocksCleared")),
		want: Batch{TS: 1700000000.25, Events: []Event{
			&BlockStored{BlockHashes: []uint64{11, 12}, TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 2},
			&BlockRemoved{BlockHashes: []uint64{11}},
			&AllBlocksCleared{},
		}},
	},
	{
		// Current vLLM, array_like: [ts, events, dp_rank], BlockStored of
		// 11 fields (extra_keys nil, group_idx, kv_cache_spec_kind; the
		// sliding window is a trailing default, so omitted), BlockRemoved
		// of 4 (medium, group_idx).
		name: "array_current",
		payload: cat([]byte{0x93}, f64(1700000001.5), []byte{0x92},
			[]byte{0x9b}, fixstr("BlockStored"), []byte{0x91, 0x15}, []byte{0x14}, []byte{0x92, 0x05, 0x06}, []byte{0x02},
			nilb, fixstr("GPU"), nilb, nilb, []byte{0x00}, fixstr("full_attention"),
			[]byte{0x94}, fixstr("BlockRemoved"), []byte{0x91, 0x15}, fixstr("GPU"), []byte{0x00},
			[]byte{0x01}),
		want: Batch{TS: 1700000001.5, DataParallelRank: i64p(1), Events: []Event{
			&BlockStored{BlockHashes: []uint64{21}, Parent: 20, HasParent: true, TokenIDs: []uint32{5, 6}, BlockSize: 2,
				Medium: "GPU", GroupIdx: i64p(0), KVCacheSpecKind: "full_attention"},
			&BlockRemoved{BlockHashes: []uint64{21}, Medium: "GPU", GroupIdx: i64p(0)},
		}},
	},
	{
		// Current vLLM without array_like: maps at both levels, a BlockStored
		// with every field the format names (and locality, which it does not
		// know), a BlockRemoved with group_idx.
		name: "map_current",
		payload: cat([]byte{0x83},
			fixstr("ts"), f64(1700000002),
			fixstr("events"), []byte{0x92},
			[]byte{0x8d},
			fixstr("type"), fixstr("BlockStored"),
			fixstr("block_hashes"), []byte{0x92}, u64(0x8000000000000001), u64(0x8000000000000002),
			fixstr("parent_block_hash"), nilb,
			fixstr("token_ids"), tokens4,
			fixstr("block_size"), []byte{0x02},
			fixstr("lora_id"), []byte{0x03},
			fixstr("medium"), fixstr("GPU"),
			fixstr("lora_name"), fixstr("sql-lora"),
			fixstr("extra_keys"), []byte{0x92, 0x91}, fixstr("salt"), nilb, // [["salt"], nil]
			fixstr("group_idx"), []byte{0x00},
			fixstr("kv_cache_spec_kind"), fixstr("full_attention"),
			str8("kv_cache_spec_sliding_window"), nilb,
			fixstr("locality"), fixstr("LOCAL"),
			[]byte{0x84},
			fixstr("type"), fixstr("BlockRemoved"),
			fixstr("block_hashes"), []byte{0x91}, u64(0x8000000000000002),
			fixstr("medium"), fixstr("GPU"),
			fixstr("group_idx"), []byte{0x00},
			str8("data_parallel_rank"), nilb),
		want: Batch{TS: 1700000002, Events: []Event{
			&BlockStored{BlockHashes: []uint64{0x8000000000000001, 0x8000000000000002}, TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 2,
				LoraID: i64p(3), Medium: "GPU", LoraName: "sql-lora", GroupIdx: i64p(0), KVCacheSpecKind: "full_attention"},
			&BlockRemoved{BlockHashes: []uint64{0x8000000000000002}, Medium: "GPU", GroupIdx: i64p(0)},
		}},
	},
	{
		// A publisher that writes "no parent" as 0 (llm-d's simulator, FNV
		// hashes): the decoder reports the 0 as it is; the router decides.
		name: "parent_zero",
		payload: cat([]byte{0x93}, f64(3), []byte{0x91},
			[]byte{0x99}, fixstr("BlockStored"), []byte{0x91}, u64(0xcbf29ce484222325), []byte{0x00}, []byte{0x92, 0x07, 0x08}, []byte{0x02},
			nilb, fixstr("GPU"), nilb, nilb,
			nilb),
		want: Batch{TS: 3, Events: []Event{
			&BlockStored{BlockHashes: []uint64{0xcbf29ce484222325}, Parent: 0, HasParent: true, TokenIDs: []uint32{7, 8}, BlockSize: 2, Medium: "GPU"},
		}},
	},
	{
		// A LoRA adapter's blocks: lora_id and lora_name set, the same tokens
		// as the base model's.
		name: "lora",
		payload: cat([]byte{0x93}, f64(4), []byte{0x92},
			[]byte{0x99}, fixstr("BlockStored"), []byte{0x91, 0x31}, nilb, tokens2, []byte{0x02},
			nilb, fixstr("GPU"), nilb, nilb,
			[]byte{0x99}, fixstr("BlockStored"), []byte{0x91, 0x32}, nilb, tokens2, []byte{0x02},
			[]byte{0x01}, fixstr("GPU"), fixstr("sql-lora"), nilb,
			nilb),
		want: Batch{TS: 4, Events: []Event{
			&BlockStored{BlockHashes: []uint64{0x31}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "GPU"},
			&BlockStored{BlockHashes: []uint64{0x32}, TokenIDs: []uint32{1, 2}, BlockSize: 2, LoraID: i64p(1), Medium: "GPU", LoraName: "sql-lora"},
		}},
	},
	{
		// Offloading: a block stored on GPU and copied to CPU, then removed
		// from CPU only, then from GPU.
		name: "medium",
		payload: cat([]byte{0x93}, f64(5), []byte{0x94},
			[]byte{0x99}, fixstr("BlockStored"), []byte{0x91, 0x41}, nilb, tokens2, []byte{0x02}, nilb, fixstr("GPU"), nilb, nilb,
			[]byte{0x99}, fixstr("BlockStored"), []byte{0x91, 0x41}, nilb, tokens2, []byte{0x02}, nilb, fixstr("CPU"), nilb, nilb,
			[]byte{0x93}, fixstr("BlockRemoved"), []byte{0x91, 0x41}, fixstr("CPU"),
			[]byte{0x93}, fixstr("BlockRemoved"), []byte{0x91, 0x41}, fixstr("GPU"),
			nilb),
		want: Batch{TS: 5, Events: []Event{
			&BlockStored{BlockHashes: []uint64{0x41}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "GPU"},
			&BlockStored{BlockHashes: []uint64{0x41}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "CPU"},
			&BlockRemoved{BlockHashes: []uint64{0x41}, Medium: "CPU"},
			&BlockRemoved{BlockHashes: []uint64{0x41}, Medium: "GPU"},
		}},
	},
	{
		// A hybrid model: the same block hashes stored in group 0 (full
		// attention) and group 1 (sliding window), then removed from group 1
		// alone, as the window slides past them.
		name: "hybrid_group_idx",
		payload: cat([]byte{0x93}, f64(6), []byte{0x93},
			[]byte{0x9b}, fixstr("BlockStored"), []byte{0x91, 0x51}, nilb, tokens2, []byte{0x02},
			nilb, fixstr("GPU"), nilb, nilb, []byte{0x00}, fixstr("full_attention"),
			[]byte{0x9b}, fixstr("BlockStored"), []byte{0x91, 0x51}, nilb, tokens2, []byte{0x02},
			nilb, fixstr("GPU"), nilb, nilb, []byte{0x01}, fixstr("sliding_window"),
			[]byte{0x94}, fixstr("BlockRemoved"), []byte{0x91, 0x51}, fixstr("GPU"), []byte{0x01},
			nilb),
		want: Batch{TS: 6, Events: []Event{
			&BlockStored{BlockHashes: []uint64{0x51}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "GPU", GroupIdx: i64p(0), KVCacheSpecKind: "full_attention"},
			&BlockStored{BlockHashes: []uint64{0x51}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "GPU", GroupIdx: i64p(1), KVCacheSpecKind: "sliding_window"},
			&BlockRemoved{BlockHashes: []uint64{0x51}, Medium: "GPU", GroupIdx: i64p(1)},
		}},
	},
	{
		// Hash encodings: an unsigned uint64, a signed int64 (a publisher
		// that reads SHA-256 bytes as a signed long), a negative fixint, and
		// a 32-byte digest of which the last 8 bytes count.
		name: "hash_encodings",
		payload: cat([]byte{0x93}, f64(7), []byte{0x91},
			[]byte{0x92}, fixstr("BlockRemoved"), []byte{0x94},
			u64(0xfedcba9876543210), i64(-2), []byte{0xff}, bin8(digest(0x0102030405060708)),
			nilb),
		want: Batch{TS: 7, Events: []Event{
			&BlockRemoved{BlockHashes: []uint64{0xfedcba9876543210, 0xfffffffffffffffe, 0xffffffffffffffff, 0x0102030405060708}},
		}},
	},
}

func TestGoldenFrames(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			path := filepath.Join("testdata", "golden", g.name+".msgpack")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, g.payload, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			stored, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(stored, g.payload) {
				t.Fatalf("%s differs from the frame built in golden_test.go; rerun with -update if the change is meant", path)
			}
			got, err := DecodeBatch(stored)
			if err != nil {
				t.Fatalf("DecodeBatch: %v", err)
			}
			if !reflect.DeepEqual(got, g.want) {
				t.Errorf("DecodeBatch =\n%s\nwant\n%s", dump(got), dump(g.want))
			}
		})
	}
}

// TestGoldenFramesSurviveTruncation checks the sad path on every dialect:
// every proper prefix of a golden frame is an error, never a panic or a
// silently shorter batch.
func TestGoldenFramesSurviveTruncation(t *testing.T) {
	for _, g := range goldens {
		for n := range len(g.payload) {
			if _, err := DecodeBatch(g.payload[:n]); err == nil {
				t.Errorf("%s cut to %d of %d bytes decoded without error", g.name, n, len(g.payload))
			}
		}
	}
}

// dump prints a batch with its events' fields and pointers' values, so a
// failed comparison shows what differs.
func dump(b Batch) string {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "ts=%v dp=%v skipped=%d\n", b.TS, optInt(b.DataParallelRank), b.Skipped)
	for _, ev := range b.Events {
		switch e := ev.(type) {
		case *BlockStored:
			fmt.Fprintf(&buf, "  %+v lora_id=%v group_idx=%v\n", *e, optInt(e.LoraID), optInt(e.GroupIdx))
		case *BlockRemoved:
			fmt.Fprintf(&buf, "  %+v group_idx=%v\n", *e, optInt(e.GroupIdx))
		default:
			fmt.Fprintf(&buf, "  %T %+v\n", ev, ev)
		}
	}
	return buf.String()
}

func optInt(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
