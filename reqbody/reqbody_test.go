package reqbody

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// chunked hides a reader's length, as a chunked upload does.
type chunked struct{ io.Reader }

func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		length  int64 // Content-Length; -1 for unknown
		limit   int64
		wantErr error // nil, or the kind of error
	}{
		// A body within the limit is read whole, known length or not.
		{"a small body of known length is read", "hello", 5, 10, nil},
		{"a body of unknown length within the limit is read", "hello", -1, 10, nil},
		{"a body exactly at the limit is read", strings.Repeat("x", 10), 10, 10, nil},
		// Sad path: over the limit, by its header or by what it sends.
		{"a declared length over the limit is refused unread", strings.Repeat("x", 11), 11, 10, &TooLargeError{}},
		{"a chunked body that passes the limit is refused", strings.Repeat("x", 11), -1, 10, &TooLargeError{}},
	}
	b := NewBudget(1 << 20)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			r.Body = io.NopCloser(chunked{strings.NewReader(tt.body)})
			r.ContentLength = tt.length
			body, release, err := b.Read(httptest.NewRecorder(), r, tt.limit)
			if tt.wantErr != nil {
				var tl *TooLargeError
				if !errors.As(err, &tl) || tl.Limit != tt.limit {
					t.Fatalf("err = %v, want a TooLargeError at %d", err, tt.limit)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			if string(body) != tt.body {
				t.Errorf("body = %q, want %q", body, tt.body)
			}
		})
	}
}

func TestLargeBodiesWaitForTheBudget(t *testing.T) {
	b := NewBudget(Small + 1)
	large := func(ctx context.Context) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", Small+1))).WithContext(ctx)
		return r
	}
	_, release, err := b.Read(httptest.NewRecorder(), large(context.Background()), 1<<20)
	if err != nil {
		t.Fatal(err)
	}

	// A small body never waits, even with the budget spent.
	small := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("hi"))
	if _, rel, err := b.Read(httptest.NewRecorder(), small, 1<<20); err != nil {
		t.Fatalf("small body: %v", err)
	} else {
		rel()
	}

	// A second large body waits; its client leaving ends the wait with ErrGone.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := b.Read(httptest.NewRecorder(), large(ctx), 1<<20)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a second large body was read while the budget was spent: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrGone) {
		t.Fatalf("err = %v, want ErrGone", err)
	}

	// Once the first is released, the next is read.
	release()
	_, rel, err := b.Read(httptest.NewRecorder(), large(context.Background()), 1<<20)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	rel()
}

// TestASlowSenderLosesItsShare: a client that declares a large body and
// sends a few bytes of it is cut off when its read time ends, so the body
// waiting behind it is read (without the deadline it waited for as long as
// the slow client liked).
func TestASlowSenderLosesItsShare(t *testing.T) {
	defer func(f func(int64) time.Duration) { readTime = f }(readTime)
	readTime = func(int64) time.Duration { return 200 * time.Millisecond }
	b := NewBudget(Small + 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, release, err := b.Read(w, r, 1<<20)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		release()
	}))
	defer srv.Close()
	// The slow client: Small+1 bytes declared, 10 sent, then nothing.
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n0123456789", Small+1)
	time.Sleep(50 * time.Millisecond) // let it take the share
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader(strings.Repeat("x", Small+1)))
	if err != nil {
		t.Fatalf("the body behind the slow one: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the body behind the slow one got %d", resp.StatusCode)
	}
}

// TestASlowSmallBodyIsCutOff: a client that declares a small body and
// trickles it is cut off when its read time ends, rather than holding its
// connection for as long as it likes (thousands of them held every
// connection the dashboard allows, and /healthz went unanswered).
func TestASlowSmallBodyIsCutOff(t *testing.T) {
	defer func(f func(int64) time.Duration) { readTime = f }(readTime)
	readTime = func(int64) time.Duration { return 200 * time.Millisecond }
	b := NewBudget(Small)
	done := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, release, err := b.Read(w, r, 1<<20)
		if err == nil {
			release()
		} else {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
		done <- err
	}))
	defer srv.Close()
	conn := trickle(t, srv, "/")
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a body of 1 byte out of 100 was read whole")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the slow body still held its handler after 5 s")
	}
	// The connection must go too: before it answers, net/http reads what
	// is left of a small body, and a deadline lifted after the failed read
	// let that read wait on the client for ever.
	closesWithin(t, conn, 3*time.Second)
}

// trickle opens a connection to srv that posts to path a body of 100 bytes
// and sends its first byte only.
func trickle(t *testing.T, srv *httptest.Server, path string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0", path)
	return conn
}

// closesWithin fails t unless the server closes conn within d, after its
// answer if it sends one.
func closesWithin(t *testing.T, conn net.Conn, d time.Duration) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(d))
	for {
		if _, err := conn.Read(make([]byte, 512)); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the trickling client's connection was still open after %s", d)
			}
			return
		}
	}
}

// TestDeadlineIsLiftedForTheAnswer: once the body is read, the deadline
// goes, so a handler that answers slowly (a streamed answer) is not cut.
func TestDeadlineIsLiftedForTheAnswer(t *testing.T) {
	defer func(f func(int64) time.Duration) { readTime = f }(readTime)
	readTime = func(int64) time.Duration { return 100 * time.Millisecond }
	b := NewBudget(Small)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, release, err := b.Read(w, r, 1<<20)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		release()
		time.Sleep(300 * time.Millisecond) // past the read time
		w.Write(body)
	}))
	defer srv.Close()
	answers(t, srv.URL, "hello", "hello")
}

// TestPacedBoundsABodyNoHandlerReads: a route that never reads its body
// (a 404, a 405) still answers only after net/http has read what is left
// of it, so without Paced a client trickling the body held the connection
// (the audit's PUT route probed with POST held it past 25 s).
func TestPacedBoundsABodyNoHandlerReads(t *testing.T) {
	defer func(f func(int64) time.Duration) { readTime = f }(readTime)
	readTime = func(int64) time.Duration { return 200 * time.Millisecond }
	srv := httptest.NewServer(Paced(http.NotFoundHandler()))
	defer srv.Close()
	closesWithin(t, trickle(t, srv, "/nowhere"), 3*time.Second)
}

// TestPacedLiftsTheDeadlineOnceTheBodyIsRead: a handler that reads its body
// and then works past the read time keeps its request's context and
// answers in full.
func TestPacedLiftsTheDeadlineOnceTheBodyIsRead(t *testing.T) {
	defer func(f func(int64) time.Duration) { readTime = f }(readTime)
	readTime = func(int64) time.Duration { return 100 * time.Millisecond }
	srv := httptest.NewServer(Paced(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for range 3 { // a stream of 300 ms, three times the read time
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			w.Write(body)
			http.NewResponseController(w).Flush()
		}
	})))
	defer srv.Close()
	answers(t, srv.URL, "ab", "ababab")
}

// answers fails t unless posting body to url is answered with want, whole.
func answers(t *testing.T, url, body, want string) {
	t.Helper()
	resp, err := http.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != want {
		t.Fatalf("answer %q, %v; want %q", got, err, want)
	}
}
