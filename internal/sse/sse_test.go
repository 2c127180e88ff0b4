package sse

import (
	"slices"
	"strings"
	"testing"
)

// events feeds stream to a decoder with the given limit, size bytes at a
// time (all at once when size is 0), and returns the events it gives, a
// TooLong one as "<too long>", and Partial before End.
func events(stream string, size, limit int) (got []string, partial int) {
	d := &Decoder{Limit: limit}
	add := func(ev Event) {
		if ev.TooLong {
			got = append(got, "<too long>")
			return
		}
		got = append(got, string(ev.Data))
	}
	p := []byte(stream)
	for len(p) > 0 {
		piece := p
		if size > 0 && len(piece) > size {
			piece = piece[:size]
		}
		p = p[len(piece):]
		for len(piece) > 0 {
			n, ev, ok := d.Feed(piece)
			piece = piece[n:]
			if ok {
				add(ev)
			}
		}
	}
	partial = d.Partial()
	if ev, ok := d.End(); ok {
		add(ev)
	}
	return got, partial
}

func TestDecoder(t *testing.T) {
	chunk := `{"choices":[{"delta":{"content":"Hi"}}]}`
	tests := []struct {
		name        string
		stream      string
		want        []string
		wantPartial int // bytes after the last blank line
	}{
		{"one data line per event, as most workers send",
			"data: " + chunk + "\n\ndata: [DONE]\n\n", []string{chunk, "[DONE]"}, 0},
		{"a JSON chunk split over two data lines is joined with a newline",
			"data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"Hi\"}}]}\n\n", []string{"{\"choices\":[{\"delta\":\n{\"content\":\"Hi\"}}]}"}, 0},
		{"CRLF line ends",
			"data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n", []string{"a\nb", "c"}, 0},
		{"bare CR line ends",
			"data: a\rdata: b\r\rdata: c\r\r", []string{"a\nb", "c"}, 0},
		{"line ends mixed in one stream",
			"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\n\n", []string{"a\nb\nc", "d"}, 0},
		{"data: without a space keeps the whole value; a second space is kept",
			"data:x\n\ndata:  y\n\n", []string{"x", " y"}, 0},
		{"comments are skipped, inside an event too",
			": keep-alive\n\ndata: a\n: still thinking\ndata: b\n\n", []string{"a\nb"}, 0},
		{"event, id and retry fields are left aside",
			"event: message\nid: 7\nretry: 1000\ndata: a\n\n", []string{"a"}, 0},
		{"an event without data lines is no event",
			"event: ping\n\n: hi\n\n\n\n", nil, 0},
		{"a data line without a colon adds an empty line",
			"data\ndata: x\n\n", []string{"\nx"}, 0},
		{"an empty data line is an event with empty data",
			"data:\n\n", []string{""}, 0},
		{"a field named like data but longer is another field",
			"datax: a\ndat: b\ndata : c\n\n", nil, 0},
		{"a leading byte-order mark is ignored",
			"\xef\xbb\xbfdata: a\n\n", []string{"a"}, 0},
		{"a byte-order mark later in the stream is not",
			"data: a\n\n\xef\xbb\xbfdata: b\n\n", []string{"a"}, 0},
		{"the last event is given at the end even without a blank line after it",
			"data: a\n\ndata: [DONE]\n", []string{"a", "[DONE]"}, len("data: [DONE]\n")},
		{"so is an unfinished last line",
			"data: a\n\ndata: {\"cut", []string{"a", "{\"cut"}, len("data: {\"cut")},
		{"the partial event is counted from the end of the last blank line, CRLF whole",
			"data: a\r\n\r\ndata: b", []string{"a", "b"}, len("data: b")},
		// sad path
		{"an event over the limit is given as too long, and the next one whole",
			"data: " + strings.Repeat("x", 70) + "\ndata: y\n\ndata: z\n\n", []string{"<too long>", "z"}, 0},
		{"an event whose lines together pass the limit is too long",
			strings.Repeat("data: 1234567890\n", 6) + "\n", []string{"<too long>"}, 0},
		{"a stream of only line ends gives nothing", "\r\n\r\r\n\n", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Whole, a byte at a time as the worst network would, and in
			// 3-byte writes, which split every CRLF somewhere.
			for _, size := range []int{0, 1, 3} {
				got, partial := events(tt.stream, size, 64)
				if !slices.Equal(got, tt.want) || partial != tt.wantPartial {
					t.Fatalf("fed %d bytes at a time: events %q, %d bytes partial; want %q, %d", size, got, partial, tt.want, tt.wantPartial)
				}
			}
		})
	}
}

// TestDecoderStopsAtEachEvent proves Feed returns as each event ends, so
// that a caller can time each one as the bytes that end it arrive.
func TestDecoderStopsAtEachEvent(t *testing.T) {
	d := &Decoder{}
	p := []byte("data: a\n\ndata: b\n\ndata: c")
	n, ev, ok := d.Feed(p)
	if !ok || string(ev.Data) != "a" || n != len("data: a\n\n") {
		t.Fatalf("first Feed read %d bytes, event %q %v; want 9 bytes and a", n, ev.Data, ok)
	}
	p = p[n:]
	n, ev, ok = d.Feed(p)
	if !ok || string(ev.Data) != "b" || n != len("data: b\n\n") {
		t.Fatalf("second Feed read %d bytes, event %q %v; want 9 bytes and b", n, ev.Data, ok)
	}
	if n, _, ok = d.Feed(p[n:]); ok || n != len("data: c") || d.Partial() != n {
		t.Fatalf("third Feed read %d bytes (partial %d), ok %v; want all 7 held as partial", n, d.Partial(), ok)
	}
}

// reference decodes a whole stream the slow and obvious way: line ends
// made LF, then split into lines. Its last event is given as End gives it.
func reference(stream string, limit int) (got []string, partial int) {
	s := strings.TrimPrefix(stream, bom)
	// Where the bytes after the last blank line begin, in s. A blank
	// line is a line end right after another or at the start.
	lineBegin, last := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] != '\r' && s[i] != '\n' {
			continue
		}
		end := i + 1
		if s[i] == '\r' && end < len(s) && s[end] == '\n' {
			end++
		}
		if i == lineBegin {
			last = end
		}
		lineBegin = end
		i = end - 1
	}
	if last > 0 {
		last += len(stream) - len(s) // the byte-order mark
	}
	partial = len(stream) - last

	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	var data strings.Builder
	has := false
	dispatch := func() {
		if has {
			if data.Len() > limit {
				got = append(got, "<too long>")
			} else {
				got = append(got, strings.TrimSuffix(data.String(), "\n"))
			}
		}
		data.Reset()
		has = false
	}
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		if line == "" {
			if i < len(lines)-1 {
				dispatch()
			}
			continue
		}
		name, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		if name == "data" {
			data.WriteString(value + "\n")
			has = true
		}
	}
	dispatch()
	return got, partial
}

// FuzzDecoder checks that any stream, fed in pieces of any size, gives the
// events and partial count the reference gives, and that the decoder never
// holds more than its limit.
func FuzzDecoder(f *testing.F) {
	for _, s := range []string{
		"data: {\"a\":\ndata: 1}\n\ndata: [DONE]\n\n",
		"data: a\r\ndata: b\r\n\r\n: c\r\r\nevent: x\rdata:y\r\r",
		"\xef\xbb\xbfdata\n\n\xef\xbbdata: x\n\n",
		"data: " + strings.Repeat("z", 70) + "\n\n",
	} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, s string, size uint8) {
		const limit = 64
		want, wantPartial := reference(s, limit)
		d := &Decoder{Limit: limit}
		var got []string
		p := []byte(s)
		step := max(int(size), 1)
		for len(p) > 0 {
			piece := p[:min(step, len(p))]
			p = p[len(piece):]
			for len(piece) > 0 {
				n, ev, ok := d.Feed(piece)
				if n <= 0 && !ok || n > len(piece) {
					t.Fatalf("Feed read %d of %d bytes", n, len(piece))
				}
				piece = piece[n:]
				if ok && ev.TooLong {
					got = append(got, "<too long>")
				} else if ok {
					got = append(got, string(ev.Data))
				}
				if d.Held() > limit {
					t.Fatalf("holds %d bytes, over its limit of %d", d.Held(), limit)
				}
			}
		}
		partial := d.Partial()
		if ev, ok := d.End(); ok && ev.TooLong {
			got = append(got, "<too long>")
		} else if ok {
			got = append(got, string(ev.Data))
		}
		if !slices.Equal(got, want) || partial != wantPartial {
			t.Fatalf("in %d-byte pieces: events %q, partial %d; the reference gives %q, %d", step, got, partial, want, wantPartial)
		}
	})
}
