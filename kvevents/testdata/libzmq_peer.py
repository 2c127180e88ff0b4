"""A KV-event peer on libzmq (pyzmq) and Python's msgpack, for
libzmq_test.go: the other end of kvlens's ZMQ sockets, written with neither
go-zeromq nor kvlens's codec.

  libzmq_peer.py pub PUB_ADDR REPLAY_ADDR N GAP
      Publishes as vLLM's ZmqEventPublisher does: a PUB socket and a ROUTER
      replay socket, both bound; messages [topic, seq (8 bytes big-endian),
      msgpack payload], seq 0 to N-1, one every 20 ms after a line on
      stdin. Seq GAP is kept for replay but never sent live. A replay
      request [id, "", start_seq] is answered with [id, "", seq, payload]
      for each buffered seq from start_seq, then seq -1 and an empty
      payload, from the start, before the line, as vLLM's publisher
      thread answers. Exits when stdin closes.

  libzmq_peer.py pub-connect SUB_ADDR TOPIC N
      Publishes the same messages under TOPIC from a PUB socket that
      connects to a bound subscriber, as llm-d's publishers do, with no
      replay socket; exits when stdin closes.

  libzmq_peer.py sub PUB_ADDR REPLAY_ADDR N
      Connects a SUB socket to PUB_ADDR, says "ready" once connected, and
      prints each message it gets as a JSON line {"how": "live", "seq",
      "batch"}; once it has seen seq N-1, or none for 10 s, it asks
      REPLAY_ADDR from seq 0 with a DEALER socket and prints the answers
      with "how": "replay", then "done". Bytes print as hex strings.

Payloads (pub): seq s stores two blocks of 4 tokens, hashes 10s+1 and
10s+2, tokens 8s to 8s+7, parent 10s-8 (none for s = 0). Even seqs write
hashes as unsigned ints, odd ones as 32-byte digests whose last 8 bytes
are the value; every third seq writes the batch and event as maps (newer
vLLM), the others as arrays, with a data-parallel rank of 0.
"""

import json
import select
import struct
import sys
import time

import msgpack
import zmq


def digest(v):
    return b"\xee" * 24 + struct.pack(">Q", v)


def payload(s):
    hashes = [10 * s + 1, 10 * s + 2]
    if s % 2 == 1:
        hashes = [digest(h) for h in hashes]
    parent = None if s == 0 else 10 * s - 8
    tokens = list(range(8 * s, 8 * s + 8))
    if s % 3 == 2:
        event = {"type": "BlockStored", "block_hashes": hashes,
                 "parent_block_hash": parent, "token_ids": tokens,
                 "block_size": 4, "lora_id": None, "medium": "GPU"}
        batch = {"ts": 1700000000.0 + s, "events": [event],
                 "data_parallel_rank": 0}
    else:
        event = ["BlockStored", hashes, parent, tokens, 4, None, "GPU"]
        batch = [1700000000.0 + s, [event], 0]
    return msgpack.packb(batch, use_bin_type=True)


def serve_replay(router, buffered):
    while router.poll(0):
        frames = router.recv_multipart()
        ident, start = frames[0], struct.unpack(">Q", frames[-1])[0]
        for seq, data in buffered:
            if seq >= start:
                router.send_multipart([ident, b"", struct.pack(">Q", seq), data])
        router.send_multipart([ident, b"", struct.pack(">q", -1), b""])


def publish(pub_addr, replay_addr, n, gap, topic=b"", connect=False):
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    router = None
    if connect:
        pub.connect(pub_addr)
    else:
        pub.bind(pub_addr)
        router = ctx.socket(zmq.ROUTER)
        router.bind(replay_addr)
    print("bound", flush=True)
    buffered = []
    # vLLM's publisher thread serves replay from the start, before it has
    # published anything: so does this, while it waits for the line.
    while True:
        if router is not None:
            serve_replay(router, buffered)
        ready, _, _ = select.select([sys.stdin], [], [], 0.01)
        if ready:
            sys.stdin.readline()
            break
    for s in range(n):
        data = payload(s)
        buffered.append((s, data))
        if s != gap:
            pub.send_multipart([topic, struct.pack(">Q", s), data])
        deadline = time.time() + 0.02
        while time.time() < deadline:
            if router is not None:
                serve_replay(router, buffered)
            time.sleep(0.002)
    while True:
        if router is not None:
            serve_replay(router, buffered)
        ready, _, _ = select.select([sys.stdin], [], [], 0.01)
        if ready and not sys.stdin.readline():
            return


def plain(v):
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {plain(k): plain(x) for k, x in v.items()}
    return v


def subscribe(pub_addr, replay_addr, n):
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    monitor = sub.get_monitor_socket(zmq.EVENT_CONNECTED)
    sub.connect(pub_addr)
    monitor.recv_multipart()
    print("ready", flush=True)
    while sub.poll(10000):
        frames = sub.recv_multipart()
        seq = struct.unpack(">Q", frames[1])[0]
        batch = msgpack.unpackb(frames[2], raw=False)
        print(json.dumps({"how": "live", "topic": frames[0].hex(), "seq": seq, "batch": plain(batch)}), flush=True)
        if seq == n - 1:
            break
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(replay_addr)
    dealer.send_multipart([b"", struct.pack(">Q", 0)])
    while True:
        frames = dealer.recv_multipart()
        if frames[0] == b"":
            frames = frames[1:]
        seq = struct.unpack(">q", frames[-2])[0]
        if seq == -1:
            break
        batch = msgpack.unpackb(frames[-1], raw=False)
        print(json.dumps({"how": "replay", "seq": seq, "batch": plain(batch)}), flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "pub":
        publish(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "pub-connect":
        publish(sys.argv[2], None, int(sys.argv[4]), -1, sys.argv[3].encode(), connect=True)
    else:
        subscribe(sys.argv[2], sys.argv[3], int(sys.argv[4]))
