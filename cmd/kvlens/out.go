package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// writable checks, before a long run, that each path can be written, so
// that a run of minutes or hours does not find out at its end that its
// reports have nowhere to go. It creates a missing directory, as the
// writers do, and opens each file for writing without truncating it,
// removing it again when the check made it.
func writable(paths ...string) error {
	for _, p := range paths {
		if dir := filepath.Dir(p); dir != "." {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("cannot write %s: %w", p, err)
			}
		}
		_, statErr := os.Stat(p)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("cannot write %s: %w", p, errors.Unwrap(err))
		}
		f.Close()
		if errors.Is(statErr, fs.ErrNotExist) {
			os.Remove(p)
		}
	}
	return nil
}

// writableDir checks that files can be made in dir, making it if missing,
// and leaves nothing behind.
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot write into %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".kvlens-check-*")
	if err != nil {
		return fmt.Errorf("cannot write into %s: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// freeBase returns base, or base-2, base-3, … when a file of base with one
// of exts is already in dir: reports named by a store's run id would
// otherwise overwrite those of another store's run of the same id.
func freeBase(dir, base string, exts ...string) string {
	name := base
	for i := 2; ; i++ {
		taken := false
		for _, ext := range exts {
			if _, err := os.Stat(filepath.Join(dir, name+ext)); err == nil {
				taken = true
			}
		}
		if !taken {
			return name
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}

// writeAtomic writes path through a temporary file beside it and renames
// it into place, so that a process killed mid-write leaves the old file
// whole rather than a truncated one.
func writeAtomic(path string, write func(io.Writer) error) error {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		// A device or a pipe, such as /dev/stdout, must not be renamed
		// over, and a symbolic link should still point where it did: these
		// are written in place.
		return writeInPlace(path, write)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// writeInPlace writes path through its own name, truncating it.
func writeInPlace(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stdout is standard output for every command. It remembers the first
// write that failed, a full disk or a closed descriptor, and main reports
// it: a table or report that did not reach its file must not end in exit
// status 0 as if it had.
var stdout = &stdoutWriter{w: os.Stdout}

// stdoutWriter is w that keeps its first write error and fails every write
// after it with the same error, so that a report is never half written
// with its middle missing. It is safe for concurrent use: serve's status
// lines are written from a goroutine of their own.
type stdoutWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

func (s *stdoutWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		// os.Stdout's error says "write /dev/stdout: …", a name the
		// operator never typed: the cause alone is said.
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err
		}
		s.err = &stdoutError{err}
		return n, s.err
	}
	return n, nil
}

// Err is the first write that failed, or nil.
func (s *stdoutWriter) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// stdoutError is a write to standard output that failed.
type stdoutError struct{ err error }

func (e *stdoutError) Error() string { return "write standard output: " + e.err.Error() }
func (e *stdoutError) Unwrap() error { return e.err }

// isStdoutError says that err is, or wraps, a failed write to standard
// output: a command leaves it to main, which reports it once for every
// command.
func isStdoutError(err error) bool {
	_, ok := errors.AsType[*stdoutError](err)
	return ok
}

// finish is the exit status of a command that returned status, having
// written to out: a failed write to out is said in one line on stderr and
// turns success into status 1.
func finish(status int, out *stdoutWriter, stderr io.Writer) int {
	err := out.Err()
	if err == nil {
		return status
	}
	fmt.Fprintf(stderr, "kvlens: %v\n", err)
	if status == 0 {
		status = 1
	}
	return status
}
