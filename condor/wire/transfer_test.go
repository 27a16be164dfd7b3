package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

// stream is a whole transfer stream of data with hdr.
func stream(t testing.TB, hdr TransferHeader, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	tw, err := NewTransferWriter(&b, hdr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.End(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func readAll(b []byte) (TransferHeader, []byte, FileInfo, error) {
	tr, err := NewTransferReader(bytes.NewReader(b), nil)
	if err != nil {
		return TransferHeader{}, nil, FileInfo{}, err
	}
	data, err := io.ReadAll(tr)
	return tr.Header(), data, tr.Info(), err
}

func TestTransferRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, ChunkSize - 1, ChunkSize, 3*ChunkSize + 17} {
		data := bytes.Repeat([]byte("pond"), size/4+1)[:size]
		hdr := TransferHeader{ClaimID: "c1", JobID: "3.1", Name: "in.dat", Size: int64(size)}
		got, back, info, err := readAll(stream(t, hdr, data))
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		sum := sha256.Sum256(data)
		if got != hdr || !bytes.Equal(back, data) || info.Size != int64(size) || info.SHA256 != hex.EncodeToString(sum[:]) || info.Name != "in.dat" {
			t.Errorf("%d bytes: header %+v, %d bytes back, info %+v", size, got, len(back), info)
		}
	}
}

// TestTransferReaderRefuses: a stream cut anywhere, corrupted, aborted or
// malformed never reads to a clean io.EOF.
func TestTransferReaderRefuses(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 2*ChunkSize+5)
	good := stream(t, TransferHeader{Name: "f"}, data)
	// Cut at every frame boundary and in the middle of frames.
	for _, cut := range []int{0, 5, len(transferMagic), len(transferMagic) + 3, len(good) / 2, len(good) - 41, len(good) - 40, len(good) - 1} {
		if _, _, _, err := readAll(good[:cut]); err == nil {
			t.Errorf("stream cut at %d of %d bytes: no error", cut, len(good))
		}
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	if _, _, _, err := readAll(flipped); !errors.Is(err, ErrChecksum) {
		t.Errorf("a flipped bit: %v, want %v", err, ErrChecksum)
	}
	var b bytes.Buffer
	tw, _ := NewTransferWriter(&b, TransferHeader{Name: "f"})
	_, _ = tw.Write([]byte("half"))
	_ = tw.Abort("f changed while it was transferred")
	if _, _, _, err := readAll(b.Bytes()); !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "f changed") {
		t.Errorf("an aborted stream: %v", err)
	}
	for name, s := range map[string]string{
		"no magic":        "HTTP/1.1 200 OK\r\n\r\n",
		"data first":      transferMagic + "D\x00\x00\x00\x01x",
		"huge header":     transferMagic + "H\xff\xff\xff\xff",
		"bad header json": transferMagic + "H\x00\x00\x00\x01{",
		"huge data frame": transferMagic + "H\x00\x00\x00\x02{}D\x7f\xff\xff\xff",
		"unknown frame":   transferMagic + "H\x00\x00\x00\x02{}Z\x00\x00\x00\x00",
		"short end":       transferMagic + "H\x00\x00\x00\x02{}E\x00\x00\x00\x01x",
	} {
		if _, _, _, err := readAll([]byte(s)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzTransferReader: whatever the bytes, the reader ends without a
// panic, reads at most as much data as the input holds, and a stream it
// reads to io.EOF is one whose data matches its checksum.
func FuzzTransferReader(f *testing.F) {
	f.Add(stream(f, TransferHeader{ClaimID: "c", JobID: "1.0", Name: "f"}, []byte("hello")))
	f.Add(stream(f, TransferHeader{Stream: StreamStdout}, nil))
	f.Add([]byte(transferMagic + "H\x00\x00\x00\x02{}A\x00\x00\x00\x03why"))
	f.Add([]byte(transferMagic + "H\x00\x00\x00\x02{}D\x00\x00\x00\x01xE\x00\x00\x00\x28"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := NewTransferReader(bytes.NewReader(b), nil)
		if err != nil {
			return
		}
		data, err := io.ReadAll(tr)
		if len(data) > len(b) {
			t.Fatalf("read %d bytes of data from %d bytes of input", len(data), len(b))
		}
		if err != nil {
			return
		}
		sum := sha256.Sum256(data)
		if info := tr.Info(); info.Size != int64(len(data)) || info.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("a stream read whole: info %+v for %d bytes with SHA-256 %x", info, len(data), sum)
		}
	})
}
