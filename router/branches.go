package router

// branches learns, from the prompts a policy routes, where prompts that
// share a prefix go different ways: the end of a starter text or a system
// prompt that many conversations open with. A conversation's own history
// never branches (each turn only extends the last), so the leading blocks
// of a chain up to its deepest branch are a prefix other conversations
// share, and the rest are its own.
//
// It keeps two generations of at most maxBranches blocks each, so its
// memory is bounded however long it runs; a prefix still in use is seen
// again, and carried into the new generation, long before it would be
// forgotten.
type branches struct {
	cur, old map[uint64]branch
}

// branch is what branches knows of one block: the block seen after it
// first, and whether another has been seen after it since.
type branch struct {
	child  uint64
	forked bool
}

// maxBranches is how many blocks one generation holds: about 10 MB, some
// ten minutes of new blocks at the default demo's two lanes.
const maxBranches = 1 << 18

// observe records chain and returns how many of its leading blocks are a
// prefix other prompts share: up to and including its deepest block that
// was followed by two different blocks.
func (b *branches) observe(chain []uint64) int {
	if b.cur == nil {
		b.cur = make(map[uint64]branch)
	}
	shared := 0
	for i, h := range chain {
		br, inCur := b.cur[h]
		ok := inCur
		if !ok {
			br, ok = b.old[h]
		}
		if i+1 < len(chain) {
			next := chain[i+1]
			switch {
			case !ok:
				br = branch{child: next}
				b.put(h, br)
			case br.child != next && !br.forked:
				br.forked = true
				b.put(h, br)
			case !inCur:
				// Carried forward: a block still in use outlives a generation.
				b.put(h, br)
			}
		}
		if br.forked {
			shared = i + 1
		}
	}
	return shared
}

func (b *branches) put(h uint64, br branch) {
	if _, ok := b.cur[h]; !ok && len(b.cur) >= maxBranches {
		b.old, b.cur = b.cur, make(map[uint64]branch)
	}
	b.cur[h] = br
}
