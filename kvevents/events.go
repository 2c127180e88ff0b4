package kvevents

// Event is one KV-cache event: *BlockStored, *BlockRemoved or *AllBlocksCleared.
type Event interface{ kind() string }

// BlockStored says a worker now holds these blocks, children of Parent.
type BlockStored struct {
	// BlockHashes are the engine's own ids of the stored blocks, in order.
	// They are opaque: the router recomputes its hashes from TokenIDs.
	BlockHashes []uint64
	// Parent is the engine id of the block before the first one; valid only
	// when HasParent.
	Parent    uint64
	HasParent bool
	// TokenIDs holds len(BlockHashes) × BlockSize token ids.
	TokenIDs []uint32
	// BlockSize is tokens per block.
	BlockSize int
	// LoraID is the adapter the blocks belong to; nil for the base model.
	LoraID *int64
	// Medium is where the blocks live, such as "GPU"; empty when not sent.
	Medium string
	// LoraName is the adapter's name; empty for the base model or when not sent.
	LoraName string
	// GroupIdx is the KV-cache group the blocks belong to on a hybrid model
	// (full attention beside sliding-window or mamba layers); nil when not
	// sent, as by a model with one group.
	GroupIdx *int64
	// KVCacheSpecKind names the group's kind, such as "full_attention" or
	// "sliding_window"; empty when not sent.
	KVCacheSpecKind string
}

// BlockRemoved says a worker evicted these blocks.
type BlockRemoved struct {
	// BlockHashes are the engine ids of the evicted blocks.
	BlockHashes []uint64
	// Medium is where the blocks lived; empty when not sent.
	Medium string
	// GroupIdx is the KV-cache group the blocks belonged to; nil when not
	// sent.
	GroupIdx *int64
}

// AllBlocksCleared says a worker dropped its whole cache (a reset or restart).
type AllBlocksCleared struct {
	// Medium, when set, limits the clear to one tier, as some publishers
	// send for an offload tier; empty means every tier.
	Medium string
}

func (*BlockStored) kind() string      { return "BlockStored" }
func (*BlockRemoved) kind() string     { return "BlockRemoved" }
func (*AllBlocksCleared) kind() string { return "AllBlocksCleared" }

// Kind returns an event's tag as vLLM writes it, such as "BlockStored".
func Kind(e Event) string { return e.kind() }

// Batch is one published message: the events of one engine step.
type Batch struct {
	// TS is the engine's timestamp, in Unix seconds.
	TS float64
	// Events are applied in order.
	Events []Event
	// DataParallelRank is the publishing engine's DP rank; nil when not sent.
	DataParallelRank *int64
	// Skipped counts events of a type this decoder does not know. DecodeBatch
	// skips them rather than failing the batch, so a newer engine's extra
	// event types cost nothing but this count. EncodeBatch ignores it.
	Skipped int
}

// Message is a batch as it crossed the wire, with its sequence number.
type Message struct {
	// Topic is the ZMQ topic frame; vLLM's default is empty.
	Topic string
	// Seq counts up by 1 per publisher; a gap means lost events.
	Seq uint64
	// Batch is the decoded payload.
	Batch Batch
}
