package router

import (
	"encoding/json"

	"github.com/zeebo/xxh3"
)

// LoRA adapters. vLLM serves each adapter under its own model name and
// keys an adapter's KV blocks apart from the base model's, since the same
// tokens give other KV under another adapter. The index does the same: an
// adapter's chain hashes are the base chain's, each XORed with a salt drawn
// from the adapter's name. XOR keeps a chain a chain (a prefix of the
// salted chain is the salted prefix), so a request for an adapter is hashed
// as usual and salted once, and matches only that adapter's blocks.

// adapterSalt returns the salt of adapter; 0, no salt, for the base model.
func adapterSalt(adapter string) uint64 {
	if adapter == "" {
		return 0
	}
	s := xxh3.HashStringSeed(adapter, 0x4c6f5241) // "LoRA"
	if s == 0 {
		s = 1 // 0 means the base model
	}
	return s
}

// adapt salts req's chain when its model is a LoRA adapter some worker has
// stored blocks of. req.Adapter, when the caller set it, names the adapter;
// otherwise the body's "model" is looked at, and only once the index has
// seen an adapter at all, so the base model's requests pay nothing.
func (r *Router) adapt(req *Request) {
	if len(req.Chain) == 0 || !r.index.HasAdapters() {
		return
	}
	if req.Adapter == "" && len(req.Body) > 0 {
		var m struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(req.Body, &m) == nil && r.index.IsAdapter(m.Model) {
			req.Adapter = m.Model
		}
	}
	salt := adapterSalt(req.Adapter)
	if salt == 0 {
		return
	}
	salted := make([]uint64, len(req.Chain))
	for i, h := range req.Chain {
		salted[i] = h ^ salt
	}
	req.Chain = salted
}
