package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"sync/atomic"
	"testing"
)

// msg is one typed protocol message.
func msg(typ byte, body string) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

// untyped is a startup-phase packet: length, code, body.
func untyped(code uint32, body string) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, uint32(8+len(body)))
	binary.BigEndian.PutUint32(b[4:], code)
	return append(b, body...)
}

func TestPGCounterCountsStatementsAndForwardsEveryByte(t *testing.T) {
	var in bytes.Buffer
	in.Write(untyped(sslRequestCode, ""))
	in.Write(untyped(196608, "user\x00postgres\x00database\x00x\x00\x00")) // protocol 3.0 startup
	in.Write(msg('Q', "BEGIN\x00"))
	// A pgx batch: two statements in one pipeline, one Sync.
	for range 2 {
		in.Write(msg('P', "\x00INSERT ...\x00\x00\x00"))
		in.Write(msg('B', "\x00\x00\x00\x00\x00\x00\x00\x00"))
		in.Write(msg('D', "P\x00"))
		in.Write(msg('E', "\x00\x00\x00\x00\x00"))
	}
	in.Write(msg('S', ""))
	in.Write(msg('Q', "COMMIT\x00"))
	in.Write(msg('X', ""))
	want := append([]byte(nil), in.Bytes()...)

	p := &pgCounter{}
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	var answers atomic.Int32
	if err := p.forward(bufio.NewReader(&in), w, &answers); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("forwarded %d bytes, want the %d sent, unchanged", out.Len(), len(want))
	}
	c := p.counts()
	if c.requests() != 4 || c.roundTrips() != 3 || c.parses != 2 {
		t.Fatalf("counted %+v: requests %d (want 4: BEGIN, 2 executes, COMMIT), round trips %d (want 3)", c, c.requests(), c.roundTrips())
	}
	if answers.Load() != 1 {
		t.Fatalf("%d one-byte answers owed by the server, want 1 (the SSL request)", answers.Load())
	}

	// The server's side: the one-byte answer to the SSL request, then the
	// startup's messages, then the answers: a simple Query of two
	// statements completes twice.
	var srv bytes.Buffer
	srv.WriteByte('N')
	srv.Write(msg('R', "\x00\x00\x00\x00"))
	srv.Write(msg('Z', "I"))
	srv.Write(msg('C', "BEGIN\x00"))
	srv.Write(msg('C', "SET\x00"))
	srv.Write(msg('Z', "T"))
	srv.Write(msg('E', "SERROR\x00\x00"))
	srv.Write(msg('N', "Snotice\x00\x00")) // a NoticeResponse, not an answer byte
	srv.Write(msg('Z', "E"))
	want = append([]byte(nil), srv.Bytes()...)
	out.Reset()
	w = bufio.NewWriter(&out)
	if err := p.backward(bufio.NewReader(&srv), w, &answers); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("forwarded %d bytes back, want the %d received, unchanged", out.Len(), len(want))
	}
	c = p.counts()
	if c.completes != 2 || c.errs != 1 || c.statements() != 3 {
		t.Fatalf("counted %+v from the server: want 2 completions and 1 error", c)
	}
}

func TestPGCounterRefusesAGarbledStream(t *testing.T) {
	var in bytes.Buffer
	in.Write(untyped(196608, "user\x00u\x00\x00"))
	in.Write([]byte{'Q', 0, 0, 0, 2}) // a length shorter than itself
	p := &pgCounter{}
	if err := p.forward(bufio.NewReader(&in), bufio.NewWriter(&bytes.Buffer{}), &atomic.Int32{}); err == nil {
		t.Fatal("a message of length 2 was forwarded")
	}
}

func TestParseGCTrace(t *testing.T) {
	log := "time=... level=INFO msg=x\n" +
		"gc 1 @0.010s 1%: 0.012+0.45+0.002 ms clock, 0.025+0.1/0.3/0+0.005 ms cpu, 3->3->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"gc 2 @1.500s 3%: 0.02+2.1+0.01 ms clock, 0.04+0.5/1.9/0+0.02 ms cpu, 310->320->180 MB, 330 MB goal, 41 MB stacks, 0 MB globals, 2 P\n"
	gcs := parseGCTrace(log)
	if len(gcs) != 2 {
		t.Fatalf("parsed %d GC lines, want 2", len(gcs))
	}
	if gcs[1].liveMB != 180 || gcs[1].stacksMB != 41 || gcs[0].liveMB != 1 {
		t.Fatalf("parsed %+v", gcs)
	}
}

func TestMedianAndPhases(t *testing.T) {
	if m := median([]float64{5, 1, 3}); m != 3 {
		t.Fatalf("median = %v, want 3", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("median = %v, want 2.5", m)
	}
	if _, err := parsePhases("light,nope"); err == nil {
		t.Fatal("an unknown phase was accepted")
	}
	ph, err := parsePhases(" light, riverdurable ")
	if err != nil || !ph["light"] || !ph["riverdurable"] || ph["river"] {
		t.Fatalf("parsePhases = %v, %v", ph, err)
	}
}

func TestInflightPerJob(t *testing.T) {
	r := inflightResult{peakRunning: 1000, idleRSS: 20 << 20, rssAtPeak: 70 << 20, peakHeap: 40, peakStacks: 10, idleHeap: 2}
	if got := r.perJobRSS(); got != float64(50<<20)/1000 {
		t.Fatalf("RSS per job = %v", got)
	}
	if got := r.perJobHeap(); got != float64(48<<20)/1000 {
		t.Fatalf("heap per job = %v", got)
	}
}
