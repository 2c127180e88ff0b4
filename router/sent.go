package router

import "container/list"

// sentIndex remembers, per worker, the block hashes of the prompts the
// router sent there: the "approximate tree" of routers that read no KV
// events (SGLang's and vLLM router's cache_aware, llm-d's prefix-cache
// scorer). Each worker keeps at most capacity blocks; past that the least
// recently sent block is forgotten, as those routers' LRU eviction does.
// It is not safe for concurrent use: a Policy's Pick runs under the
// router's decision lock.
type sentIndex struct {
	capacity int
	workers  map[string]*sentBlocks
}

type sentBlocks struct {
	lru  *list.List // front is the most recently sent; values are uint64
	byID map[uint64]*list.Element
}

func newSentIndex(capacity int) *sentIndex {
	return &sentIndex{capacity: max(1, capacity), workers: map[string]*sentBlocks{}}
}

// match is how many leading blocks of chain were sent to worker.
func (s *sentIndex) match(worker string, chain []uint64) int {
	w := s.workers[worker]
	if w == nil {
		return 0
	}
	for i, h := range chain {
		if _, ok := w.byID[h]; !ok {
			return i
		}
	}
	return len(chain)
}

// insert records that chain was sent to worker. The chain's first block is
// touched last, so eviction takes a prompt's tail before its head and what
// remains is still a prefix.
func (s *sentIndex) insert(worker string, chain []uint64) {
	w := s.workers[worker]
	if w == nil {
		w = &sentBlocks{lru: list.New(), byID: map[uint64]*list.Element{}}
		s.workers[worker] = w
	}
	for i := len(chain) - 1; i >= 0; i-- {
		h := chain[i]
		if e, ok := w.byID[h]; ok {
			w.lru.MoveToFront(e)
			continue
		}
		w.byID[h] = w.lru.PushFront(h)
	}
	for len(w.byID) > s.capacity {
		e := w.lru.Back()
		delete(w.byID, e.Value.(uint64))
		w.lru.Remove(e)
	}
}
