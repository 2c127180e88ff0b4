package sim

import (
	"net/http"
	"testing"
)

// discardWriter is a ResponseWriter that drops what it is given, so a
// benchmark measures the chunk writer alone.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}

// BenchmarkChunkWriter writes one chat answer of 64 tokens, a chunk and a
// flush per token as serveStream does, and its end.
func BenchmarkChunkWriter(b *testing.B) {
	w := &discardWriter{h: http.Header{}}
	pieces := []string{" the", " quick", " brown", " fox", "\n", " \"quoted\"", " jumps", "."}
	b.ReportAllocs()
	for b.Loop() {
		enc := newChunkWriter(w, "chatcmpl-sim-0-1", DefaultModel, 1700000000, true)
		writeAnswer(enc, pieces, 64)
		enc.done()
	}
}

// writeAnswer writes a chat answer of n pieces as serveStream does: the
// role, then a chunk and a flush per token, the last with its end.
func writeAnswer(enc *chunkWriter, pieces []string, n int) {
	enc.role(0)
	for i := range n {
		reason := ""
		if i == n-1 {
			reason = "length"
		}
		enc.token(0, pieces[i%len(pieces)], reason)
		enc.flush()
	}
}
