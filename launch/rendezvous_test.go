package launch

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// listen returns a loopback listener for rank 0 and the config template.
func listen(t *testing.T, world int, timeout time.Duration) (net.Listener, Config) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return ln, Config{WorldSize: world, MasterAddr: "127.0.0.1", MasterPort: port, Token: []byte("job-token"), Timeout: timeout}
}

type outcome struct {
	payload []byte
	err     error
}

// runRanks runs rank 0 on ln and the given other ranks (cfg copies with
// their Rank set; mutate may change a rank's config) as goroutines.
func runRanks(t *testing.T, ln net.Listener, cfg Config, payload []byte, ranks []int, mutate func(i int, c *Config)) (outcome, []outcome) {
	t.Helper()
	var wg sync.WaitGroup
	var zero outcome
	others := make([]outcome, len(ranks))
	wg.Add(1)
	go func() {
		defer wg.Done()
		zero.payload, zero.err = Serve(context.Background(), cfg, ln, payload)
	}()
	for i, r := range ranks {
		c := cfg
		c.Rank = r
		if mutate != nil {
			mutate(i, &c)
		}
		wg.Add(1)
		go func(i int, c Config) {
			defer wg.Done()
			others[i].payload, others[i].err = Rendezvous(context.Background(), c, nil)
		}(i, c)
	}
	wg.Wait()
	return zero, others
}

func randomPayload(t *testing.T) []byte {
	p := make([]byte, 128) // an NCCL unique id
	rand.Read(p)
	return p
}

func TestRendezvousAllRanks(t *testing.T) {
	t.Parallel()
	ln, cfg := listen(t, 4, 5*time.Second)
	payload := randomPayload(t)
	zero, others := runRanks(t, ln, cfg, payload, []int{1, 2, 3}, nil)
	if zero.err != nil {
		t.Fatalf("rank 0: %v", zero.err)
	}
	for i, o := range others {
		if o.err != nil || !bytes.Equal(o.payload, payload) {
			t.Errorf("rank %d: %x, %v", i+1, o.payload, o.err)
		}
	}
}

func TestRendezvousMissingRank(t *testing.T) {
	t.Parallel()
	const timeout = 700 * time.Millisecond
	ln, cfg := listen(t, 4, timeout)
	start := time.Now()
	zero, others := runRanks(t, ln, cfg, randomPayload(t), []int{1, 3}, nil)
	took := time.Since(start)
	if !errors.Is(zero.err, ErrTimeout) || fmt.Sprint(MissingRanks(zero.err)) != "[2]" || !strings.Contains(zero.err.Error(), "rank 2 of 4 never joined") {
		t.Errorf("rank 0: %v (missing %v)", zero.err, MissingRanks(zero.err))
	}
	for i, o := range others {
		if !errors.Is(o.err, ErrFailed) || !strings.Contains(o.err.Error(), "rank 2 of 4 never joined") {
			t.Errorf("rank %d: %v", []int{1, 3}[i], o.err)
		}
	}
	if took > timeout+2*time.Second {
		t.Errorf("took %v with a timeout of %v", took, timeout)
	}
}

func TestRendezvousWrongToken(t *testing.T) {
	t.Parallel()
	ln, cfg := listen(t, 3, 700*time.Millisecond)
	zero, others := runRanks(t, ln, cfg, randomPayload(t), []int{1, 2}, func(i int, c *Config) {
		if c.Rank == 2 {
			c.Token = []byte("other-job")
		}
	})
	if others[0].err == nil || !errors.Is(others[0].err, ErrFailed) {
		t.Errorf("rank 1: %v; want the job's failure", others[0].err)
	}
	if !errors.Is(others[1].err, ErrRejected) || !strings.Contains(others[1].err.Error(), "bad token") {
		t.Errorf("rank 2 (wrong token): %v; want a rejection for its token", others[1].err)
	}
	if !errors.Is(zero.err, ErrTimeout) || !strings.Contains(zero.err.Error(), "rank 2 of 3 never joined") ||
		!strings.Contains(zero.err.Error(), "bad token for rank 2") {
		t.Errorf("rank 0: %v; want a timeout naming rank 2 and the rejected token", zero.err)
	}
}

func TestRendezvousDuplicateRank(t *testing.T) {
	t.Parallel()
	ln, cfg := listen(t, 3, 5*time.Second)
	payload := randomPayload(t)
	zero := make(chan outcome, 1)
	go func() {
		p, err := Serve(context.Background(), cfg, ln, payload)
		zero <- outcome{p, err}
	}()
	rank := func(r int) chan outcome {
		ch := make(chan outcome, 1)
		c := cfg
		c.Rank = r
		go func() {
			p, err := Rendezvous(context.Background(), c, nil)
			ch <- outcome{p, err}
		}()
		return ch
	}
	first := rank(1)
	time.Sleep(200 * time.Millisecond) // rank 1 has joined by now (loopback)
	dup := <-rank(1)
	if !errors.Is(dup.err, ErrRejected) || !strings.Contains(dup.err.Error(), "rank 1 already joined from 127.0.0.1:") {
		t.Errorf("duplicate rank 1: %v; want a rejection", dup.err)
	}
	last := <-rank(2)
	for i, o := range []outcome{<-first, last, <-zero} {
		if o.err != nil || !bytes.Equal(o.payload, payload) {
			t.Errorf("rank %d: %x, %v", []int{1, 2, 0}[i], o.payload, o.err)
		}
	}
}

// rawJoin speaks the protocol by hand, to send what Rendezvous never would.
func rawJoin(t *testing.T, addr string, token []byte, rank, world uint32) (byte, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var hello [37]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		t.Fatal(err)
	}
	req := append([]byte(magic), version, 0, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(req[5:], rank)
	binary.BigEndian.PutUint32(req[9:], world)
	c.Write(append(req, mac(token, hello[5:], rank, world)...))
	var st [1]byte
	if _, err := io.ReadFull(c, st[:]); err != nil {
		t.Fatal(err)
	}
	msg := ""
	if st[0] != statusOK {
		msg, _ = readMsg(c)
	}
	return st[0], msg
}

func TestRendezvousRejects(t *testing.T) {
	t.Parallel()
	ln, cfg := listen(t, 2, 5*time.Second)
	done := make(chan outcome)
	go func() {
		p, err := Serve(context.Background(), cfg, ln, []byte("id"))
		done <- outcome{p, err}
	}()
	addr := cfg.Addr()
	for _, c := range []struct {
		rank, world uint32
		token       string
		want        string
	}{
		{5, 2, "job-token", "rank 5 outside [0, 2)"},
		{1, 3, "job-token", "says the world has 3 ranks"},
		{0, 2, "job-token", "two processes claim rank 0"},
		{1, 2, "wrong", "bad token"},
	} {
		st, msg := rawJoin(t, addr, []byte(c.token), c.rank, c.world)
		if st != statusReject || !strings.Contains(msg, c.want) {
			t.Errorf("rank %d world %d token %q: status %d %q; want a rejection containing %q", c.rank, c.world, c.token, st, msg, c.want)
		}
	}
	// A client that says nothing, and one that speaks another protocol,
	// do not disturb the job.
	silent, _ := net.Dial("tcp", addr)
	defer silent.Close()
	junk, _ := net.Dial("tcp", addr)
	junk.Write([]byte("GET / HTTP/1.0\r\n\r\n......................"))
	defer junk.Close()
	c := cfg
	c.Rank = 1
	p, err := Rendezvous(context.Background(), c, nil)
	if err != nil || string(p) != "id" {
		t.Fatalf("rank 1 after the bad clients: %q, %v", p, err)
	}
	if o := <-done; o.err != nil {
		t.Fatalf("rank 0: %v", o.err)
	}
}

func TestRendezvousNoRankZero(t *testing.T) {
	t.Parallel()
	ln, cfg := listen(t, 2, 400*time.Millisecond)
	ln.Close()
	// Nobody listens on port 1 (tcpmux, below the ports a test may bind):
	// the port ln freed could be taken by a parallel test's rank 0, which
	// reset the connection (a CI run: "no HELLO from rank 0").
	cfg.MasterPort = 1
	cfg.Rank = 1
	start := time.Now()
	_, err := Rendezvous(context.Background(), cfg, nil)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "cannot reach rank 0") {
		t.Errorf("err = %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v", took)
	}
}

func TestRendezvousSingle(t *testing.T) {
	p, err := Rendezvous(context.Background(), Config{WorldSize: 1}, []byte("x"))
	if err != nil || string(p) != "x" {
		t.Errorf("%q, %v", p, err)
	}
	if _, err := Rendezvous(context.Background(), Config{Rank: 1, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: 1}, nil); err == nil {
		t.Errorf("no token accepted")
	}
}
