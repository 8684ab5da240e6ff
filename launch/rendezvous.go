package launch

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"time"
)

// The rendezvous protocol (version 1). Rank 0 listens on
// BindAddr:MASTER_PORT; every other rank connects to MASTER_ADDR:MASTER_PORT.
// All integers are big-endian.
//
//	rank 0 → rank:  HELLO   "HAPR" | version u8 = 1 | nonce [32]
//	rank → rank 0:  JOIN    "HAPR" | version u8 = 1 | rank u32 | world u32 | mac [32]
//	                        mac = HMAC-SHA256(key = HAP_JOB_TOKEN,
//	                              "hap-rendezvous-v1" | nonce | rank u32 | world u32)
//	rank 0 → rank:  ACCEPT  status u8 = 0
//	             or REJECT  status u8 = 1 | len u16 | reason     (then close)
//	... once all WORLD_SIZE ranks have joined, or the timeout passes:
//	rank 0 → rank:  GO      status u8 = 0 | len u32 | payload    (payload ≤ 1 MiB)
//	             or FAIL    status u8 = 2 | len u16 | reason     (then close)
//	rank → rank 0:  ACK     'K'                                  (then close)
//
// A non-zero rank retries connecting until Timeout, then waits up to
// VerdictGrace more for rank 0's GO or FAIL, so rank 0's FAIL, which names
// the missing ranks, reaches every rank that joined.
// The token itself never crosses the wire, and a fresh nonce per
// connection makes a recorded JOIN useless; rank 0 compares MACs with
// hmac.Equal (constant time). Rank 0 rejects a bad MAC, a world size not
// its own, a rank outside [0, WORLD_SIZE) and a rank already joined (rank 0
// included); a rejected connection does not end the job, but is named in
// the error if the job then times out. Timeouts: the whole rendezvous is
// bounded by Config.Timeout (HAP_RENDEZVOUS_TIMEOUT, default 5 minutes);
// a connection must complete its JOIN within HandshakeTimeout; ranks
// retry connecting (backing off to 1 s) until the deadline, so they may
// start before rank 0.

const (
	magic   = "HAPR"
	version = 1
	macTag  = "hap-rendezvous-v1"

	statusOK     = 0
	statusReject = 1
	statusFail   = 2

	// MaxPayload bounds what rank 0 may broadcast.
	MaxPayload = 1 << 20
	// HandshakeTimeout bounds one connection's HELLO/JOIN exchange.
	HandshakeTimeout = 10 * time.Second
	// VerdictGrace is how much longer than Timeout a non-zero rank waits
	// for rank 0's GO or FAIL (it stops trying to connect after Timeout).
	VerdictGrace = 2 * time.Second
)

// Errors a rendezvous can end with; messages say more.
var (
	// ErrTimeout: the rendezvous did not complete in time (ranks missing,
	// or rank 0 unreachable).
	ErrTimeout = errors.New("rendezvous timed out")
	// ErrRejected: rank 0 refused this rank's connection.
	ErrRejected = errors.New("rendezvous rejected")
	// ErrFailed: rank 0 reported that the job failed.
	ErrFailed = errors.New("rendezvous failed")
)

// Rendezvous gathers the job: rank 0 waits for every other rank and sends
// them payload (the NCCL unique id); every other rank returns what rank 0
// sent. It fails, never hangs, after cfg.Timeout. World size 1 returns
// payload at once.
func Rendezvous(ctx context.Context, cfg Config, payload []byte) ([]byte, error) {
	return rendezvous(ctx, cfg, payload, nil)
}

// Serve is Rendezvous for rank 0 on a listener it already holds (tests,
// or a launcher that bound the port itself). It closes ln.
func Serve(ctx context.Context, cfg Config, ln net.Listener, payload []byte) ([]byte, error) {
	return rendezvous(ctx, cfg, payload, ln)
}

func rendezvous(ctx context.Context, cfg Config, payload []byte, ln net.Listener) ([]byte, error) {
	if cfg.WorldSize < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.WorldSize {
		return nil, fmt.Errorf("launch: rank %d outside a world of %d", cfg.Rank, cfg.WorldSize)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.WorldSize == 1 {
		if ln != nil {
			ln.Close()
		}
		return payload, nil
	}
	if len(cfg.Token) == 0 {
		return nil, envErr(EnvToken, "empty: the rendezvous needs the job's token")
	}
	if cfg.Rank != 0 {
		// Wait a little longer than rank 0 does, so its verdict (which
		// names the missing ranks) arrives before this rank gives up.
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout+VerdictGrace)
		defer cancel()
		return join(ctx, cfg, time.Now().Add(cfg.Timeout))
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if len(payload) > MaxPayload {
		return nil, fmt.Errorf("launch: payload of %d bytes exceeds %d", len(payload), MaxPayload)
	}
	if ln == nil {
		addr := joinHostPort(cfg.BindAddr, cfg.MasterPort)
		var err error
		var lc net.ListenConfig
		if ln, err = lc.Listen(ctx, "tcp", addr); err != nil {
			return nil, fmt.Errorf("launch: rank 0 cannot listen on %s: %w", addr, err)
		}
	}
	if err := serve(ctx, cfg, ln, payload); err != nil {
		return nil, err
	}
	return payload, nil
}

func mac(token, nonce []byte, rank, world uint32) []byte {
	h := hmac.New(sha256.New, token)
	h.Write([]byte(macTag))
	h.Write(nonce)
	var b [8]byte
	binary.BigEndian.PutUint32(b[:4], rank)
	binary.BigEndian.PutUint32(b[4:], world)
	h.Write(b[:])
	return h.Sum(nil)
}

func writeMsg(c net.Conn, status byte, msg string) error {
	if len(msg) > 65535 {
		msg = msg[:65535]
	}
	b := []byte{status, 0, 0}
	binary.BigEndian.PutUint16(b[1:], uint16(len(msg)))
	_, err := c.Write(append(b, msg...))
	return err
}

func readMsg(r io.Reader) (string, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	b := make([]byte, binary.BigEndian.Uint16(n[:]))
	_, err := io.ReadFull(r, b)
	return string(b), err
}

// joinReq is a handshake's outcome, decided by serve's loop.
type joinReq struct {
	conn   net.Conn
	rank   int
	reject string // non-empty: the handshake already failed
}

// handshake sends HELLO and reads JOIN on one connection.
func handshake(ctx context.Context, cfg Config, c net.Conn) joinReq {
	dl := time.Now().Add(HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	c.SetDeadline(dl)
	nonce := make([]byte, 32)
	if _, err := rand.Read(nonce); err != nil {
		return joinReq{conn: c, rank: -1, reject: "internal error: " + err.Error()}
	}
	if _, err := c.Write(append(append([]byte(magic), version), nonce...)); err != nil {
		return joinReq{conn: c, rank: -1, reject: "write failed: " + err.Error()}
	}
	var b [4 + 1 + 4 + 4 + 32]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return joinReq{conn: c, rank: -1, reject: "no valid JOIN within the handshake timeout: " + err.Error()}
	}
	if string(b[:4]) != magic || b[4] != version {
		return joinReq{conn: c, rank: -1, reject: fmt.Sprintf("not a hap rendezvous v%d client", version)}
	}
	rank, world := binary.BigEndian.Uint32(b[5:]), binary.BigEndian.Uint32(b[9:])
	if !hmac.Equal(b[13:], mac(cfg.Token, nonce, rank, world)) {
		return joinReq{conn: c, rank: int(rank), reject: fmt.Sprintf("bad token for rank %d: its %s differs from rank 0's", rank, EnvToken)}
	}
	if int(world) != cfg.WorldSize {
		return joinReq{conn: c, rank: int(rank), reject: fmt.Sprintf("rank %d says the world has %d ranks; rank 0 says %d", rank, world, cfg.WorldSize)}
	}
	if rank >= world {
		return joinReq{conn: c, rank: int(rank), reject: fmt.Sprintf("rank %d outside [0, %d)", rank, world)}
	}
	return joinReq{conn: c, rank: int(rank)}
}

func serve(ctx context.Context, cfg Config, ln net.Listener, payload []byte) error {
	reqs := make(chan joinReq)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			go func() {
				// The rendezvous ending (ctx cancelled) ends the read too.
				stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
				r := handshake(ctx, cfg, c)
				stop()
				select {
				case reqs <- r:
				case <-done:
					// Too late: the rendezvous has ended.
					msg := fmt.Sprintf("the rendezvous is over (all %d ranks had joined, or it failed)", cfg.WorldSize)
					if r.reject == "" {
						msg = fmt.Sprintf("rank %d already joined: %s", r.rank, msg)
					}
					c.SetWriteDeadline(time.Now().Add(time.Second))
					writeMsg(c, statusReject, msg)
					c.Close()
				}
			}()
		}
	}()
	stopListening := sync1(func() { ln.Close() })
	defer stopListening()

	joined := map[int]net.Conn{}
	var rejected []string
	closeAll := func(status byte, msg string) {
		for _, c := range joined {
			c.SetWriteDeadline(time.Now().Add(time.Second))
			writeMsg(c, status, msg)
			c.Close()
		}
	}
	for len(joined) < cfg.WorldSize-1 {
		select {
		case r := <-reqs:
			who := r.conn.RemoteAddr().String()
			reason := r.reject
			if reason == "" {
				if r.rank == 0 {
					reason = "rank 0 is this process (listening here); two processes claim rank 0"
				} else if prev, dup := joined[r.rank]; dup {
					reason = fmt.Sprintf("rank %d already joined from %s", r.rank, prev.RemoteAddr())
				}
			}
			if reason != "" {
				rejected = append(rejected, fmt.Sprintf("%s (%s)", who, reason))
				r.conn.SetWriteDeadline(time.Now().Add(time.Second))
				writeMsg(r.conn, statusReject, reason)
				r.conn.Close()
				continue
			}
			r.conn.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := r.conn.Write([]byte{statusOK}); err != nil {
				rejected = append(rejected, fmt.Sprintf("%s (rank %d: lost while accepting: %v)", who, r.rank, err))
				r.conn.Close()
				continue
			}
			joined[r.rank] = r.conn
		case <-ctx.Done():
			missing := missingRanks(joined, cfg.WorldSize)
			msg := fmt.Sprintf("%v after %v: rank%s %s of %d never joined rank 0 at %s", ErrTimeout, cfg.Timeout, plural(missing), list(missing), cfg.WorldSize, cfg.Addr())
			if len(rejected) > 0 {
				msg += "; rejected connections: " + strings.Join(rejected, "; ")
			}
			closeAll(statusFail, msg)
			return fmt.Errorf("launch: %w", &timeoutError{msg: msg, missing: missing})
		}
	}
	stopListening()
	// Everyone is here: send the payload, then wait for every ACK.
	dl := time.Now().Add(HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	go_ := make([]byte, 5, 5+len(payload))
	binary.BigEndian.PutUint32(go_[1:], uint32(len(payload)))
	go_ = append(go_, payload...)
	var failed []string
	for r, c := range joined {
		c.SetDeadline(dl)
		if _, err := c.Write(go_); err != nil {
			failed = append(failed, fmt.Sprintf("rank %d: %v", r, err))
		}
	}
	for r, c := range joined {
		var ack [1]byte
		if _, err := io.ReadFull(c, ack[:]); err != nil || ack[0] != 'K' {
			failed = append(failed, fmt.Sprintf("rank %d did not confirm: %v", r, err))
		}
		c.Close()
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		return fmt.Errorf("launch: %w: sending the payload: %s", ErrFailed, strings.Join(failed, "; "))
	}
	return nil
}

// timeoutError names the missing ranks and matches ErrTimeout.
type timeoutError struct {
	msg     string
	missing []int
}

func (e *timeoutError) Error() string        { return e.msg }
func (e *timeoutError) Is(target error) bool { return target == ErrTimeout }

// MissingRanks returns the ranks a timed-out rendezvous was still waiting
// for (rank 0's error), or nil.
func MissingRanks(err error) []int {
	var t *timeoutError
	if errors.As(err, &t) {
		return t.missing
	}
	return nil
}

func missingRanks(joined map[int]net.Conn, world int) []int {
	var m []int
	for r := 1; r < world; r++ {
		if _, ok := joined[r]; !ok {
			m = append(m, r)
		}
	}
	return m
}

func plural(s []int) string {
	if len(s) == 1 {
		return ""
	}
	return "s"
}

func list(s []int) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ", ")
}

func sync1(f func()) func() {
	done := false
	return func() {
		if !done {
			done = true
			f()
		}
	}
}

// join is a non-zero rank's side; it stops dialling at dialUntil.
func join(ctx context.Context, cfg Config, dialUntil time.Time) ([]byte, error) {
	addr := cfg.Addr()
	var c net.Conn
	backoff := 50 * time.Millisecond
	var lastErr error
	for {
		d := net.Dialer{Timeout: 5 * time.Second}
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		if err == nil {
			break
		}
		lastErr = err
		if time.Now().Add(backoff).After(dialUntil) || ctx.Err() != nil {
			return nil, fmt.Errorf("launch: rank %d: %w after %v: cannot reach rank 0 at %s: %v", cfg.Rank, ErrTimeout, cfg.Timeout, addr, lastErr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
	defer c.Close()
	// Close the connection if the context ends mid-read.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	fail := func(what string, err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("launch: rank %d: %w after %v: %s from rank 0 at %s", cfg.Rank, ErrTimeout, cfg.Timeout, what, addr)
		}
		return fmt.Errorf("launch: rank %d: %s from rank 0 at %s: %w", cfg.Rank, what, addr, err)
	}
	var hello [4 + 1 + 32]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		return nil, fail("no HELLO", err)
	}
	if string(hello[:4]) != magic || hello[4] != version {
		return nil, fmt.Errorf("launch: rank %d: %s is not a hap rendezvous v%d server", cfg.Rank, addr, version)
	}
	var req [4 + 1 + 4 + 4]byte
	copy(req[:], magic)
	req[4] = version
	binary.BigEndian.PutUint32(req[5:], uint32(cfg.Rank))
	binary.BigEndian.PutUint32(req[9:], uint32(cfg.WorldSize))
	if _, err := c.Write(append(req[:], mac(cfg.Token, hello[5:], uint32(cfg.Rank), uint32(cfg.WorldSize))...)); err != nil {
		return nil, fail("sending JOIN", err)
	}
	var st [1]byte
	if _, err := io.ReadFull(c, st[:]); err != nil {
		return nil, fail("no answer to JOIN", err)
	}
	if st[0] != statusOK {
		msg, _ := readMsg(c)
		return nil, fmt.Errorf("launch: rank %d: %w by rank 0 at %s: %s", cfg.Rank, ErrRejected, addr, msg)
	}
	if _, err := io.ReadFull(c, st[:]); err != nil {
		return nil, fail("no payload", err)
	}
	switch st[0] {
	case statusOK:
	case statusFail:
		msg, _ := readMsg(c)
		return nil, fmt.Errorf("launch: rank %d: %w: rank 0 says: %s", cfg.Rank, ErrFailed, msg)
	default:
		return nil, fmt.Errorf("launch: rank %d: unknown status %d from rank 0", cfg.Rank, st[0])
	}
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return nil, fail("truncated payload", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > MaxPayload {
		return nil, fmt.Errorf("launch: rank %d: payload of %d bytes exceeds %d", cfg.Rank, size, MaxPayload)
	}
	payload := make([]byte, size)
	if _, err := io.ReadFull(c, payload); err != nil {
		return nil, fail("truncated payload", err)
	}
	if _, err := c.Write([]byte{'K'}); err != nil {
		return nil, fail("acknowledging the payload", err)
	}
	return payload, nil
}
