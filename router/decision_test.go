package router

import "testing"

func TestLastDecisionKeepsWhatThePolicySaw(t *testing.T) {
	ws := fleet(2)
	rt := NewRouter(NewPool(ws), &KV{Weight: 1}, Config{BlockSize: testB})
	if _, ok := rt.LastDecision(); ok {
		t.Fatal("a router that has decided nothing reports a decision")
	}
	prompt := toks(1, 4)
	// Worker b caches the first 2 blocks, so the kv policy picks it.
	rt.Index().Apply("b", stored(0, ids(1, 2), prompt[:2*testB]))
	if _, err := rt.Decide(&Request{TokenIDs: prompt}, nil); err != nil {
		t.Fatal(err)
	}
	d, ok := rt.LastDecision()
	if !ok {
		t.Fatal("no decision after Decide")
	}
	if d.Policy != "kv" || d.Request.Tokens != 4*testB || len(d.Candidates) != 2 {
		t.Fatalf("decision = %s, %d tokens, %d candidates; want kv, %d, 2", d.Policy, d.Request.Tokens, len(d.Candidates), 4*testB)
	}
	if got := d.Candidates[d.Chosen]; got.Worker.Name != "b" || got.Overlap != 2 {
		t.Fatalf("chosen %s with overlap %d, want b with 2", got.Worker.Name, got.Overlap)
	}
	// The copy is the caller's: a later decision does not rewrite it.
	rt.Decide(&Request{TokenIDs: toks(50, 1)}, nil)
	if d.Candidates[d.Chosen].Overlap != 2 {
		t.Fatal("a later decision changed a returned decision")
	}
}
