// Package sse assembles the events of a Server-Sent Events stream as the
// WHATWG HTML standard's "Interpreting an event stream" does: lines end in
// LF, CRLF or a lone CR; an event's data lines are joined with "\n"; a
// blank line ends the event; "data:" may or may not be followed by a
// space; a line that starts with a colon is a comment; event, id and retry
// fields are read and left aside. An OpenAI-compatible worker sends one
// JSON chunk per event, usually on one data line, but may split it over
// several.
//
// Why not a library's reader: the router watches an answer as it passes
// through to the client, a write at a time, and must know where in those
// bytes the last whole event ended to hand the client whole events; the
// load generator times each event at the read that ends it. Go's SSE
// libraries read events from an io.Reader they own, which gives neither,
// so this is a push decoder of the standard's few rules.
package sse

import "bytes"

// DefaultLimit is the Limit of a Decoder that sets none (1 MiB).
const DefaultLimit = 1 << 20

// Event is one event's data.
type Event struct {
	// Data is the event's data lines joined with "\n". It is valid until
	// the next call to Feed or End.
	Data []byte
	// TooLong reports that the data passed the Decoder's Limit and was
	// dropped: Data is empty.
	TooLong bool
}

type lineState uint8

const (
	lineStart  lineState = iota // nothing of the line read yet
	inName                      // reading the field name
	afterColon                  // just past the colon, where a space is dropped
	inValue                     // reading the field's value
)

// bom is the byte-order mark a stream may start with, which is ignored.
const bom = "\xef\xbb\xbf"

// Decoder assembles events from a stream fed to it in pieces of any size,
// split anywhere. It holds no more than the data of the event in progress,
// up to Limit bytes, whatever the stream sends: an overlong line or event
// is never buffered whole. The zero Decoder is ready to use.
type Decoder struct {
	// Limit bounds an event's data, in bytes, counting a "\n" after each
	// data line; 0 means DefaultLimit. An event with more is given as
	// TooLong.
	Limit int

	state lineState
	// name is the start of the line's field name and nameLen its whole
	// length: only "data" is read, so four bytes tell it.
	name    [4]byte
	nameLen int
	isData  bool // the line is a data field
	// cr reports that the last byte fed was a CR that ended a line, so an
	// LF next is the second half of that line end; crBlank, that the line
	// it ended was blank.
	cr, crBlank bool
	bomSeen     int  // bytes of a leading byte-order mark read so far
	begun       bool // past where a byte-order mark may stand

	data    []byte // the event's data lines, each followed by "\n"
	hasData bool   // a data line was read, so the event will be given
	tooLong bool   // the data passed Limit and was dropped
	partial int    // bytes fed since the last blank line
}

// Feed reads p up to the end of the first event it completes. It returns
// how many bytes of p it read and, when an event ended with data (a blank
// line ends an event; one without data lines is no event), that event. A
// caller feeds the rest of p next.
func (d *Decoder) Feed(p []byte) (n int, ev Event, ok bool) {
	mark := 0 // where in p the bytes after the last blank line start
	i := 0
	if !d.begun {
		i = d.skipBOM(p)
	}
	for i < len(p) {
		c := p[i]
		if d.cr {
			d.cr = false
			if c == '\n' {
				i++
				if d.crBlank {
					mark = i // the second half of a blank line's CRLF
				}
				continue
			}
		}
		switch d.state {
		case lineStart, inName:
			switch c {
			case '\r', '\n':
				i++
				d.cr = c == '\r'
				if d.state == lineStart {
					d.crBlank = d.cr
					mark, d.partial = i, 0
					if ev, ok = d.dispatch(); ok {
						return i, ev, true
					}
					continue
				}
				// A line without a colon is a field with an empty value.
				d.crBlank = false
				d.isData = d.nameIsData()
				d.endLine()
			case ':':
				i++
				d.isData = d.state == inName && d.nameIsData()
				d.state = afterColon
			default:
				if d.nameLen < len(d.name) {
					d.name[d.nameLen] = c
				}
				d.nameLen++
				d.state = inName
				i++
			}
		case afterColon:
			if c == ' ' {
				i++
			}
			d.state = inValue
		case inValue:
			rest := p[i:]
			j := lineEnd(rest)
			if d.isData {
				d.add(rest[:j])
			}
			i += j
			if j < len(rest) {
				d.cr, d.crBlank = rest[j] == '\r', false
				i++
				d.endLine()
			}
		}
	}
	d.partial += len(p) - mark
	return len(p), Event{}, false
}

// skipBOM reads what p holds of a leading byte-order mark and returns how
// many bytes of p it took. Bytes that turn out not to be one are fed as
// the start of a field name, which is what they are.
func (d *Decoder) skipBOM(p []byte) int {
	i := 0
	for i < len(p) && d.bomSeen < len(bom) && p[i] == bom[d.bomSeen] {
		d.bomSeen++
		i++
	}
	if d.bomSeen == len(bom) {
		d.begun = true
		return i
	}
	if i < len(p) {
		d.begun = true
		for k := range d.bomSeen {
			d.nameLen++
			d.name[k] = bom[k]
			d.state = inName
		}
	}
	return i
}

func (d *Decoder) nameIsData() bool {
	return d.nameLen == 4 && string(d.name[:]) == "data"
}

// endLine ends a field line: a data line's "\n" is added.
func (d *Decoder) endLine() {
	if d.isData {
		d.hasData = true
		d.add([]byte{'\n'})
	}
	d.state, d.nameLen, d.isData = lineStart, 0, false
}

// add appends b to the event's data, or drops the data once it passes the
// limit. It grows the buffer no further than the limit, so that what is
// held stays within it.
func (d *Decoder) add(b []byte) {
	if d.tooLong || len(b) == 0 {
		return
	}
	limit := d.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	need := len(d.data) + len(b)
	if need > limit {
		d.tooLong, d.data = true, d.data[:0]
		return
	}
	if need > cap(d.data) {
		grown := make([]byte, len(d.data), min(max(2*cap(d.data), need, 256), limit))
		copy(grown, d.data)
		d.data = grown
	}
	d.data = append(d.data, b...)
}

// dispatch ends the event in progress and returns it, if it has data.
func (d *Decoder) dispatch() (Event, bool) {
	has, tooLong, data := d.hasData, d.tooLong, d.data
	d.hasData, d.tooLong, d.data = false, false, d.data[:0]
	switch {
	case !has:
		return Event{}, false
	case tooLong:
		return Event{TooLong: true}, true
	}
	return Event{Data: data[:len(data)-1]}, true // without the last "\n"
}

// End ends the stream, and returns the event in progress, if it has data,
// with its unfinished last line. The standard drops an event the stream
// ends before the blank line after it; End keeps it, because servers do
// end streams with "data: [DONE]\n" and nothing after, and a chunk cut
// short by the end of the stream is no valid JSON to its reader anyway.
func (d *Decoder) End() (Event, bool) {
	if d.state == inName {
		d.isData = d.nameIsData()
	}
	if d.state != lineStart {
		d.endLine()
	}
	ev, ok := d.dispatch()
	limit, data := d.Limit, d.data
	*d = Decoder{Limit: limit, data: data}
	return ev, ok
}

// Partial returns how many of the bytes fed so far came after the last
// blank line: the start of an event not yet ended. A proxy that passes on
// whole events only holds those back.
func (d *Decoder) Partial() int { return d.partial }

// Held returns how many bytes the decoder holds for the event in
// progress, which is never more than its Limit.
func (d *Decoder) Held() int { return cap(d.data) }

// lineEnd returns the index in b of the first CR or LF, or len(b).
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		i = len(b)
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}
