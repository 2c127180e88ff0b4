package router

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"slices"
	"sync"
)

// splicer gives WorkerTokenize the tokens of a chat whose earlier turn it
// has already tokenized for one round trip that carries only the new
// messages.
//
// Let closed(C) be the tokens of chat C rendered without the generation
// prompt, and G the generation prompt's tokens. For a follow-up C = P + N,
// where P is a chat tokenized before, the splicer asks for the stand-in
// chat [s] + N, where s is a short message of the role P ends with, and
// takes
//
//	tokens(C) = closed(P) ‖ tokens([s] + N)[len(closed([s])):]
//
// This relies on two properties of the engine, which Llama 3's, Qwen
// 2.5's and kvlens's templates have:
//
//  1. The template renders each message from its role and content alone,
//     after a head that depends only on the first message (a BOS, a default
//     system prompt), and ends the chat with the generation prompt; a
//     message renders the same whatever comes after it. The stand-in gives
//     the new messages a predecessor of the same role as their real one.
//  2. The BPE never merges across a message boundary: Llama 3 and Qwen 2.5
//     put special tokens there, which the tokenizer splits out before
//     merging; kvlens's template puts "\n<|", which cl100k never merges.
//
// The splicer checks what it can on every answer (the stand-in chat starts
// with closed([s]) and ends with G), and holds its first auditSplices
// splices against a whole-chat request. Any failure turns splicing off for
// good: every chat then costs a whole round trip, as before. A template
// that breaks property 1 in a way the checks cannot see after the audits
// (one that renders a message differently once the chat passes some
// length, say) would go unnoticed; the blindness detector would show it.
type splicer struct {
	mu     sync.Mutex
	off    bool
	gen    []uint32            // G; nil until learned
	heads  map[string][]uint32 // role -> closed([s]) for a stand-in s of that role
	noHead map[string]bool     // roles whose lone stand-in the engine refused
	audits int                 // splices held against a whole request so far

	closed map[[32]byte][]uint32 // prefix key -> closed tokens of that chat
	order  [][32]byte            // insertion order, for eviction
	first  int
	bytes  int
}

// auditSplices is how many splices are held against a whole request.
const auditSplices = 3

// maxSpliceBytes bounds the closed-chat cache, at 4 bytes a token (64 MiB).
const maxSpliceBytes = 64 << 20

// standInText is the stand-in message's content.
const standInText = "kvlens"

// tokens returns the tokens of the chat messages (a JSON array), as wk's
// /tokenize gives them.
func (s *splicer) tokens(ctx context.Context, t *WorkerTokenize, wk *Worker, model string, messages json.RawMessage) ([]uint32, error) {
	whole := func() ([]uint32, error) {
		payload, _ := json.Marshal(tokenizeBody{Model: model, Messages: messages})
		return t.ask(ctx, wk, payload)
	}
	var msgs []json.RawMessage
	if json.Unmarshal(messages, &msgs) != nil || len(msgs) == 0 {
		return whole()
	}
	keys := prefixKeys(model, msgs)
	s.mu.Lock()
	off := s.off
	s.mu.Unlock()
	if off {
		return whole()
	}
	gen, ok := s.learnGen(ctx, t, wk, model)
	if !ok {
		return whole()
	}
	k, base := s.longestPrefix(keys[:len(keys)-1])
	if k == 0 {
		ids, err := whole()
		if err == nil && endsWith(ids, gen) {
			s.remember(keys[len(keys)-1], ids[:len(ids)-len(gen)])
		}
		return ids, err
	}
	role := roleOf(msgs[k-1])
	head, ok := s.head(ctx, t, wk, model, role)
	if !ok {
		return whole()
	}
	standIn, _ := json.Marshal(map[string]string{"role": role, "content": standInText})
	rest, _ := json.Marshal(append([]json.RawMessage{standIn}, msgs[k:]...))
	payload, _ := json.Marshal(tokenizeBody{Model: model, Messages: rest})
	x, err := t.ask(ctx, wk, payload)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(x[:min(len(head), len(x))], head) || !endsWith(x, gen) || len(x) < len(head)+len(gen) {
		s.turnOff(t, "the stand-in chat does not start with the stand-in's tokens or end with the generation prompt")
		return whole()
	}
	ids := append(slices.Clip(base), x[len(head):]...)
	s.mu.Lock()
	audit := s.audits < auditSplices
	s.audits++
	s.mu.Unlock()
	if audit {
		want, err := whole()
		if err != nil {
			return nil, err
		}
		if !slices.Equal(ids, want) {
			s.turnOff(t, "a spliced chat differs from the whole chat's tokens")
			return want, nil
		}
	}
	s.remember(keys[len(keys)-1], ids[:len(ids)-len(gen)])
	return ids, nil
}

// turnOff stops splicing for good and says why.
func (s *splicer) turnOff(t *WorkerTokenize, why string) {
	s.mu.Lock()
	was := s.off
	s.off = true
	s.mu.Unlock()
	if !was && t.Logf != nil {
		t.Logf("tokenize: each chat now costs a whole round trip: %s, so this engine's chat template cannot be tokenized message by message", why)
	}
}

// learnGen learns G, and the user stand-in's head, from the lone stand-in
// chat with and without the generation prompt: two round trips, once.
func (s *splicer) learnGen(ctx context.Context, t *WorkerTokenize, wk *Worker, model string) ([]uint32, bool) {
	s.mu.Lock()
	gen := s.gen
	s.mu.Unlock()
	if gen != nil {
		return gen, true
	}
	head, ok := s.head(ctx, t, wk, model, "user")
	if !ok {
		return nil, false
	}
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": standInText}})
	payload, _ := json.Marshal(tokenizeBody{Model: model, Messages: msgs})
	open, err := t.ask(ctx, wk, payload)
	if err != nil {
		return nil, false
	}
	if len(open) <= len(head) || !slices.Equal(open[:len(head)], head) {
		// No generation prompt of its own, or one that merges with the
		// last message, or add_generation_prompt ignored.
		s.turnOff(t, "the engine's generation prompt is not a separate suffix of the chat's tokens")
		return nil, false
	}
	s.mu.Lock()
	s.gen = open[len(head):]
	s.mu.Unlock()
	return open[len(head):], true
}

// head returns closed([s]) for a stand-in s of role: one round trip, once
// per role.
func (s *splicer) head(ctx context.Context, t *WorkerTokenize, wk *Worker, model, role string) ([]uint32, bool) {
	s.mu.Lock()
	h, ok := s.heads[role]
	refused := s.noHead[role]
	s.mu.Unlock()
	if ok || refused {
		return h, ok
	}
	no := false
	msgs, _ := json.Marshal([]map[string]string{{"role": role, "content": standInText}})
	payload, _ := json.Marshal(tokenizeBody{Model: model, Messages: msgs, AddGenerationPrompt: &no})
	h, err := t.ask(ctx, wk, payload)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		// A template that wants chats to start with a user turn refuses a
		// lone assistant stand-in; such prefixes are asked whole.
		if s.noHead == nil {
			s.noHead = map[string]bool{}
		}
		s.noHead[role] = true
		return nil, false
	}
	if s.heads == nil {
		s.heads = map[string][]uint32{}
	}
	s.heads[role] = h
	return h, true
}

// longestPrefix returns the longest chat among keys (keys[i] is the first
// i+1 messages) whose closed tokens are known: its length in messages and
// its tokens; 0 when none is.
func (s *splicer) longestPrefix(keys [][32]byte) (int, []uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(keys) - 1; i >= 0; i-- {
		if ids, ok := s.closed[keys[i]]; ok {
			return i + 1, ids
		}
	}
	return 0, nil
}

func (s *splicer) remember(key [32]byte, ids []uint32) {
	cost := 4*len(ids) + 64
	if cost > maxSpliceBytes/16 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed == nil {
		s.closed = map[[32]byte][]uint32{}
	}
	if _, ok := s.closed[key]; ok {
		return
	}
	s.closed[key] = slices.Clone(ids)
	s.order = append(s.order, key)
	s.bytes += cost
	for s.bytes > maxSpliceBytes && s.first < len(s.order) {
		old := s.order[s.first]
		s.first++
		s.bytes -= 4*len(s.closed[old]) + 64
		delete(s.closed, old)
	}
	if s.first > len(s.order)/2 && s.first > 1024 {
		s.order = slices.Clone(s.order[s.first:])
		s.first = 0
	}
}

// prefixKeys returns, for each i, a key of the model and the first i+1
// messages, each as its JSON bytes.
func prefixKeys(model string, msgs []json.RawMessage) [][32]byte {
	keys := make([][32]byte, len(msgs))
	h := sha256.Sum256([]byte(model))
	for i, m := range msgs {
		buf := make([]byte, 0, len(h)+len(m))
		buf = append(append(buf, h[:]...), m...)
		h = sha256.Sum256(buf)
		keys[i] = h
	}
	return keys
}

// roleOf reads a message's role; "" when it has none.
func roleOf(m json.RawMessage) string {
	var v struct {
		Role string `json:"role"`
	}
	json.Unmarshal(m, &v)
	return v.Role
}

func endsWith(ids, suffix []uint32) bool {
	return len(ids) >= len(suffix) && slices.Equal(ids[len(ids)-len(suffix):], suffix)
}
