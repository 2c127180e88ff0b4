// Package reqbody reads HTTP request bodies under a size cap and a byte
// budget shared by the large ones, for the router and the simulated worker
// alike.
//
// While it is parsed, a chat body costs about three times its size (the
// body, the decoded messages, the rendered segments), so a burst of 32
// bodies at the cap of a 16k-token model (2 MiB each) would otherwise hold
// 200 MiB at once, and the garbage collector lets the heap grow to twice
// what it holds. With a budget, such a burst waits its turn instead.
package reqbody

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Small is the largest body, in bytes, read without taking from the budget:
// ordinary prompts, tens of KiB, never wait for each other.
const Small = 256 << 10

// ErrGone is Read's error when the client left while its body waited for
// the budget; there is nobody to answer.
var ErrGone = errors.New("reqbody: the client went away while its request waited to be read")

// TooLargeError is Read's error for a body over the limit.
type TooLargeError struct {
	// Limit is the cap the body passed, in bytes.
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("reqbody: the request body is larger than %d bytes", e.Limit)
}

// Budget is the bytes of large bodies that may be read and parsed at once
// in a process.
type Budget struct {
	size int64
	sem  *semaphore.Weighted
}

// NewBudget returns a budget of size bytes.
func NewBudget(size int64) *Budget {
	return &Budget{size: size, sem: semaphore.NewWeighted(size)}
}

// Read reads r's body, of at most limit bytes. A large one (over Small, or
// of unknown length) first takes its size from b, up to all of it, and
// release gives that back once the caller is done parsing the body; release
// is never nil when err is nil. A body over limit is a *TooLargeError, read
// no further than the limit (not at all when its Content-Length says so); a
// client that left while waiting is ErrGone; anything else is the read's
// error.
func (b *Budget) Read(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, release func(), err error) {
	if r.ContentLength > limit {
		return nil, nil, &TooLargeError{Limit: limit}
	}
	release = func() {}
	if r.ContentLength < 0 || r.ContentLength > Small {
		n := r.ContentLength
		if n < 0 {
			n = limit
		}
		weight := min(n, b.size)
		if b.sem.Acquire(r.Context(), weight) != nil {
			return nil, nil, ErrGone
		}
		release = func() { b.sem.Release(weight) }
	}
	// Every client must send its body at a working pace: a large one would
	// otherwise hold its share of the budget, and those waiting behind it,
	// as long as it liked, and thousands of small ones trickling a byte at
	// a time would hold every connection the server allows.
	size := r.ContentLength
	if size < 0 {
		size = limit // chunked: it may run to the limit
	}
	lift := Deadline(w, r, size)
	// A known Content-Length sizes the buffer, so the body is read without
	// growing copies of it.
	buf := make([]byte, 0, max(min(r.ContentLength, limit), 512)+1)
	body, err = readAll(http.MaxBytesReader(w, r.Body, limit), buf)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		release()
		return nil, nil, &TooLargeError{Limit: limit}
	case err != nil:
		release()
		return nil, nil, err
	}
	lift()
	return body, release, nil
}

// Deadline gives the client of w readTime(n) from now to send the rest of
// a body of n bytes, and returns the func that lifts the deadline. Lift it
// only once the body is read whole, so that a streamed answer is not cut
// by it (net/http's background read of a finished body would meet it).
// After a failed read it must stay: before it answers, net/http reads what
// is left of a small body, and without the deadline that read would wait
// on the trickling client as long as it liked. Paced sets one for every
// body; Read sets its own once a large body has its share of the budget.
func Deadline(w http.ResponseWriter, r *http.Request, n int64) (lift func()) {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(readTime(n))) != nil {
		return func() {}
	}
	return func() { rc.SetReadDeadline(time.Time{}) }
}

// Paced gives every request with a body readTime of its length to send it,
// from the moment its handler starts, and lifts that deadline once the body
// has been read to its end, so that what the handler then does (stream an
// answer, run a while) is not cut by it. A handler that never reads its
// body still answers after net/http has read what is left of it (up to
// 256 KiB), and the deadline bounds that read too; a client that trickles
// its body, a byte every few seconds, would otherwise hold its connection
// as long as it liked. It is a server's outermost handler.
func Paced(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			size := r.ContentLength
			if size < 0 {
				size = 16 << 20 // chunked: the largest body any route takes
			}
			r.Body = &liftAtEOF{ReadCloser: r.Body, lift: sync.OnceFunc(Deadline(w, r, size))}
		}
		next.ServeHTTP(w, r)
	})
}

// liftAtEOF lifts a body's read deadline once the body has been read whole.
type liftAtEOF struct {
	io.ReadCloser
	lift func()
}

func (b *liftAtEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.lift()
	}
	return n, err
}

// readAll is io.ReadAll into buf, growing it only when the body outruns it.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// readTime is how long a large body of n bytes may take to arrive: 10 s,
// plus its length at 256 KiB/s (18 s for a 16k-token model's 2 MiB cap),
// well within a booth's Wi-Fi.
var readTime = func(n int64) time.Duration {
	return 10*time.Second + time.Duration(n)*time.Second/(256<<10)
}
