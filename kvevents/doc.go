// Package kvevents is the KV-cache event wire format that vLLM publishes over
// ZMQ (shared/reference/vllm-kv-events.md): workers announce the blocks they
// store and evict, and the router keeps its prefix index from them. kvlens's
// simulated workers write it with a Publisher; its router reads it with a
// Subscriber. Real vLLM, SGLang and llm-d simulator workers speak the same.
//
// # Messages
//
// Every ZMQ message has three frames: [topic, seq, payload]. The topic is
// empty by default. seq is an 8-byte big-endian uint64 that a Publisher
// starts at 0 and raises by 1 per message, as vLLM does. The payload is one
// msgpack event batch:
//
//	[ts float64, [event, ...], data_parallel_rank int|nil]
//	["BlockStored", block_hashes, parent_block_hash|nil, token_ids, block_size, lora_id|nil, medium|nil, lora_name|nil, extra_keys|nil, group_idx|nil, kv_cache_spec_kind|nil]
//	["BlockRemoved", block_hashes, medium|nil, group_idx|nil]
//	["AllBlocksCleared", medium|nil]
//
// The last two BlockStored fields, BlockRemoved's group_idx and
// AllBlocksCleared's medium are written only when set: msgspec, which vLLM
// encodes with, omits trailing defaults. extra_keys is read past, not kept:
// the router hashes token ids itself.
//
// token_ids holds len(block_hashes) × block_size ids. EncodeBatch writes
// exactly this. It writes hashes as unsigned integers, in the smallest msgpack
// form that holds them, which is what Python's msgpack does with vLLM's
// default hash (the low 64 bits of a SHA-256, read big-endian, a non-negative
// int).
//
// DecodeBatch also reads what other publishers send: the map form of newer
// vLLM ({"ts", "events", "data_parallel_rank"}, events keyed by "type") at
// either level; hashes as signed integers (kept as their two's-complement
// bits) or byte strings (the last 8 bytes, big-endian); older events without
// the trailing fields; and newer ones with more. Unknown fields and keys are
// ignored. An event of an unknown type is skipped and counted in
// Batch.Skipped rather than failing its batch, since msgpack lets it be
// stepped over cleanly and a newer engine should not blind the router.
// Hashes are opaque engine ids: the router recomputes its own chain hashes
// from token_ids.
//
// # Gaps and resets
//
// A Subscriber tracks seq per endpoint and topic, and marks each Update:
//
//   - The first message from a publisher is marked First. With a replay
//     endpoint (and a named worker), the Subscriber asks for everything
//     from seq 0 (a catch-up) the moment a connection to the publisher
//     opens, and hands it over, the first message marked First; live
//     copies of what it replayed are dropped. If that got nothing, it asks
//     again at the first live message, ahead of it. Update.Whole says the
//     publisher's whole history followed (seq 0 on, none missing);
//     otherwise the worker holds blocks published before the subscriber
//     joined that it will never hear of.
//   - A new connection on an endpoint that names its worker, after the
//     first, means the publisher restarted or its network failed
//     (Endpoint.OnConn hears of it at once). The Subscriber keeps the seq
//     it expects across connections and tells which from what comes next:
//     a seq that goes on (exactly, or with a gap for what the PUB socket
//     dropped while no one was connected) is the same publisher, and the
//     update is marked Reconnected, the index standing unless Missed says
//     events were lost; a seq that goes back (to 0, as a restarted vLLM
//     counts) is a restart, marked First and Reset. With a replay endpoint
//     it asks at once, from the message last heard: the same message back
//     means the same publisher, and what it published since is replayed;
//     nothing, or another payload at that seq, means it restarted, and its
//     new history is replayed from seq 0 (an Update marked Empty says so
//     when it has none yet). Stats().Reconnects counts the publishers that
//     went on, Stats().Resets those that restarted. Without replay, a
//     restarted publisher first heard exactly at the seq expected next
//     reads as one that went on, and one first heard past it as a gap.
//   - A jump forward is a gap. With a replay endpoint the Subscriber first asks
//     the publisher's ROUTER socket for the missing messages
//     ([id, "", start_seq] answered by [seq, payload] pairs, then seq -1) and
//     hands over what it gets, marked Replayed. What replay cannot fill is
//     reported as Update.Missed and counted in Stats().Gaps: the worker's
//     index is stale and should be cleared and rebuilt from that message on.
//   - A jump backward is a reset: the publisher restarted and counts from 0
//     again. Update.Reset (with First) says to clear the worker before
//     applying it. A restart the subscriber notices late, once the new count
//     has passed the old one, shows as a gap instead (without replay), which
//     also clears the worker.
//   - A payload that does not decode is counted in Stats().DecodeErrors,
//     logged on one line, and counted as missed by the next message.
//
// A Publisher never blocks its caller: batches wait in a bounded queue, and a
// batch that finds it full is dropped and counted. Its seq is taken first, so
// the drop is a gap every subscriber sees (and replay can fill, since dropped
// batches still enter the replay buffer).
//
// # Sockets
//
// Either side may bind. vLLM's workers bind (tcp://*:5557, * meaning every
// interface) and the router dials each; the Subscriber then has one SUB socket per worker, which keeps
// seq tracking per worker trivial. When the router binds and workers dial in,
// their messages share one socket and are told apart by topic, so each
// worker must publish under its own, such as llm-d's
// "kv@<ip>:<port>@<model>". Dials retry until they succeed, and a dialing
// socket redials when its peer goes away, whatever answered meanwhile:
// go-zeromq's own redial gave up for good when a dial connected and its
// ZMTP handshake failed, as it does against whatever holds a restarting
// engine's port for a moment (a service-mesh sidecar, a port-forward,
// another process), so a Subscriber, or a Publisher that dials, heard
// nothing more until restarted. Each dialing socket now has one goroutine
// that is its only dialer (redial.go): it dials, waits until the
// connection it made closes, and dials again; after a failed handshake it
// pauses 0.1 s, doubling to at most 2 s (redialPauseMax), so a publisher
// back on the port is heard within 2 s plus a handshake (0.02 to 0.4 s
// measured, test bound 4 s: go test -run
// 'RedialsAfterAFailedHandshake|LongFailure' -v ./kvevents/), or, if what
// held the port accepted and said nothing, within handshakeTimeout of it
// leaving. One dialer cannot connect a socket twice to one peer,
// which would hand every message over twice. A TCP connect gives up after
// 5 s (dialTimeout, listen.go), so a dial to a host that vanished sends a
// fresh SYN at least every 2.1 s, not at the kernel's backoff (8 s apart
// before the 20 s TCP_USER_TIMEOUT ended it), and a handshake must be over
// within 10 s (handshakeTimeout), on dialed connections as on accepted
// ones. go-zeromq's SUB socket returns
// io.EOF from Recv whenever one of its peers leaves; the Subscriber counts
// that in Stats().PeersLeft and keeps reading. Bound tcp:// endpoints go
// through a listener that refuses connections once its socket is closing
// (see listen.go), so a peer redialing a socket being replaced in the same
// process reaches the replacement, not the closing one. Dialed endpoints go
// through the same transport, which is also how a Subscriber learns of
// each connection (go-zeromq reports none): Endpoint.OnConn hears it open
// once the peer's READY has come, and close at the first failed read or
// write, not when go-zeromq gets round to closing it. Every connection
// through that transport (a Subscriber's dials, and those any bound socket
// accepts) has TCP keepalive (probes after 5 s of silence, 3 of them 5 s
// apart) and, on Linux, a TCP_USER_TIMEOUT of 20 s, so that a peer whose
// host vanished without closing anything (power lost, a cable pulled) is
// noticed within 20 s (deadPeerTimeout, listen.go), where Go's defaults
// took 151 s, and over 200 s for a bound publisher with data in flight. A
// Publisher that dials (Connect) goes through the same transport.
//
// The replay request is vLLM's: a DEALER sends ["", start_seq] so that the
// publisher's ROUTER sees [id, "", start_seq], exactly three frames, as
// vLLM's _service_replay requires; answers are ["", seq, payload], or
// ["", topic, seq, payload] from publishers that add the topic, ending
// with seq -1.
package kvevents
