package router

import (
	"math/bits"
	"math/rand/v2"
)

// blockMap maps a block's chain hash to a worker bitset. It is an
// open-addressing table with linear probing in one flat array: a lookup is
// one cache miss in the common case, and the lookups of a chain walk are
// independent loads the processor can overlap, which a Go map's bucket
// indirection does not allow. Chain hashes are already uniform XXH3 values;
// a per-process random multiplier still spreads them, so that crafted
// prompts cannot pile onto one probe sequence.
type blockMap struct {
	slots   []blockSlot // length a power of two; key 0 marks an empty slot
	shift   uint8       // 64 − log2(len(slots))
	n       int
	hasZero bool // key 0 lives outside the table
	zero    uint64
}

type blockSlot struct{ k, v uint64 }

var blockMapMul = rand.Uint64() | 1

const blockMapMinSlots = 16

func (m *blockMap) home(k uint64) uint64 { return (k * blockMapMul) >> m.shift }

func (m *blockMap) len() int {
	if m.hasZero {
		return m.n + 1
	}
	return m.n
}

func (m *blockMap) get(k uint64) uint64 {
	if k == 0 {
		return m.zero
	}
	if len(m.slots) == 0 {
		return 0
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(k); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.k == k {
			return s.v
		}
		if s.k == 0 {
			return 0
		}
	}
}

// set stores v under k; v == 0 deletes k.
func (m *blockMap) set(k, v uint64) {
	if k == 0 {
		m.zero, m.hasZero = v, v != 0
		return
	}
	if v == 0 {
		m.del(k)
		return
	}
	if (m.n+1)*4 > len(m.slots)*3 {
		m.resize(max(blockMapMinSlots, len(m.slots)*2))
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(k); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.k == k {
			s.v = v
			return
		}
		if s.k == 0 {
			s.k, s.v = k, v
			m.n++
			return
		}
	}
}

// del removes k with backward-shift deletion, which keeps every probe
// sequence unbroken without tombstones.
func (m *blockMap) del(k uint64) {
	if len(m.slots) == 0 {
		return
	}
	mask := uint64(len(m.slots) - 1)
	i := m.home(k)
	for {
		if m.slots[i].k == 0 {
			return
		}
		if m.slots[i].k == k {
			break
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		s := m.slots[j]
		if s.k == 0 {
			break
		}
		// Move s back into the hole at i unless its home lies in (i, j].
		if h := m.home(s.k); (j-h)&mask >= (j-i)&mask {
			m.slots[i] = s
			i = j
		}
	}
	m.slots[i] = blockSlot{}
	m.n--
	if len(m.slots) > 1024 && m.n*8 < len(m.slots) {
		m.resize(len(m.slots) / 2)
	}
}

func (m *blockMap) resize(size int) {
	old := m.slots
	m.slots = make([]blockSlot, size)
	m.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	m.n = 0
	mask := uint64(size - 1)
	for _, s := range old {
		if s.k == 0 {
			continue
		}
		i := m.home(s.k)
		for m.slots[i].k != 0 {
			i = (i + 1) & mask
		}
		m.slots[i] = s
		m.n++
	}
}
