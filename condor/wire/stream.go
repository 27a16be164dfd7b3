package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// A streamed answer (HandleStream) is JSON lines: one {"item": ...} per
// item as the server produces them, then {"end": {"items": N}}, or
// {"error": "..."} when the server failed after it began to answer. A
// reader tells a complete answer from one cut short by the end line.
type streamLine struct {
	Item  json.RawMessage `json:"item,omitempty"`
	End   *streamEnd      `json:"end,omitempty"`
	Error string          `json:"error,omitempty"`
}

type streamEnd struct {
	Items int `json:"items"`
}

// streamFlushEvery bounds how long produced items wait in the server's
// buffer: the first is sent at once, the others at least this often.
const streamFlushEvery = 50 * time.Millisecond

// HandleStream adapts a handler that produces many items to an
// http.HandlerFunc: it decodes the JSON body of a POST into a new In and
// calls f, which hands each item to emit; each is sent as it comes, the
// first at once (see ReadStream). An error of f before its first item is
// answered with the status ErrorStatus gives; one after is the stream's
// last line. emit fails once the client has gone, which should end f.
func HandleStream[In, Item any](f func(ctx context.Context, in *In, emit func(Item) error) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in, ok := readRequest[In](w, r)
		if !ok {
			return
		}
		flusher, _ := w.(http.Flusher)
		bw := bufio.NewWriterSize(w, 32<<10)
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		n := 0
		var last time.Time
		flush := func() error {
			if err := bw.Flush(); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
			last = time.Now()
			return nil
		}
		err := f(r.Context(), in, func(it Item) error {
			b, err := json.Marshal(it)
			if err != nil {
				return fmt.Errorf("encoding an answer of %s: %w", r.URL.Path, err)
			}
			if n == 0 {
				w.Header().Set("Content-Type", "application/x-ndjson")
				w.WriteHeader(http.StatusOK)
			}
			n++
			bw.WriteString(`{"item":`)
			bw.Write(b)
			if _, err := bw.WriteString("}\n"); err != nil {
				return err
			}
			if n == 1 || time.Since(last) >= streamFlushEvery {
				return flush()
			}
			return nil
		})
		switch {
		case err != nil && n == 0:
			WriteError(w, ErrorStatus(err), err)
			return
		case n == 0:
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
		}
		if err != nil {
			_ = enc.Encode(streamLine{Error: err.Error()})
		} else {
			_ = enc.Encode(streamLine{End: &streamEnd{Items: n}})
		}
		_ = flush()
	}
}

// ErrCutShort is wrapped by the error of a streamed answer that ended
// before the server said it was complete.
var ErrCutShort = errors.New("the answer was cut short")

// ReadStream reads a streamed answer (see HandleStream), decoding each
// item into a new Item and handing it to fn as it arrives; an error of
// fn ends the reading and is returned. An answer that ends without its
// end line, or with the server's error, gives an error.
func ReadStream[Item any](r io.Reader, fn func(Item) error) error {
	dec := json.NewDecoder(r)
	n := 0
	for {
		var l streamLine
		if err := dec.Decode(&l); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w after %d items", ErrCutShort, n)
			}
			return fmt.Errorf("reading item %d of the answer: %w", n+1, err)
		}
		switch {
		case l.Error != "":
			return fmt.Errorf("after %d items: %w", n, &Error{Status: http.StatusInternalServerError, Msg: l.Error})
		case l.End != nil:
			if l.End.Items != n {
				return fmt.Errorf("%w: the server sent %d items, %d arrived", ErrCutShort, l.End.Items, n)
			}
			return nil
		case l.Item == nil:
			return fmt.Errorf("item %d of the answer: a line with neither an item, an end nor an error", n+1)
		}
		var it Item
		if err := json.Unmarshal(l.Item, &it); err != nil {
			return fmt.Errorf("decoding item %d of the answer: %w", n+1, err)
		}
		n++
		if err := fn(it); err != nil {
			return err
		}
	}
}
