package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/tapml/tapml/runtime/remote/device"
	"github.com/tapml/tapml/runtime/remote/proto"
)

// ServerOptions configure a device server.
type ServerOptions struct {
	// Token, when set, must be presented by every host (and browser page);
	// others are refused.
	Token string
	// Workers run the kernels of host sessions on a local device, each
	// session in a worker process (native mode). Leave it nil with Relay.
	Workers *Workers
	// AllowedHosts are host names, besides loopback addresses and
	// "localhost", that requests may name in their Host header when the
	// server has no token. A page of another site whose name resolves to
	// this machine (DNS rebinding) names its own host and is refused.
	AllowedHosts []string
	// MaxConns bounds the WebSocket connections open at once (default 32);
	// more are refused before the upgrade.
	MaxConns int
	// Relay makes the server a relay to a browser page: the page (served
	// by Page) attaches at /attach, and each host session is passed to it.
	Relay bool
	// Page serves the browser device's page and program on plain GETs in
	// relay mode.
	Page http.Handler
	// Log receives one line per connection event (nil: discarded).
	Log *log.Logger
	// HandshakeTimeout bounds the wait for a connection's first message
	// (default 30 s).
	HandshakeTimeout time.Duration
	// AttachWait bounds how long a host waits for a browser page to be
	// attached and free, in relay mode (default 30 s).
	AttachWait time.Duration
	// WriteTimeout bounds each write to a connection (default 60 s).
	WriteTimeout time.Duration
}

// Server is a device server: an http.Handler that accepts host connections
// (WebSocket on any path but /attach) and, in relay mode, browser pages
// (WebSocket on /attach).
type Server struct {
	o     ServerOptions
	conns atomic.Int32
	auth  authLimiter

	mu      sync.Mutex
	browser *browserConn
	failed  *pageFailure // the last page that could not start, until one attaches
}

// pageFailure is what a browser page that could not start said (no WebGPU
// adapter, say), and where it was.
type pageFailure struct{ addr, msg string }

// finalResetID is the id of the Reset sent when a host leaves; its reply is
// dropped.
const finalResetID = 1<<32 - 1

// hardReadLimit is where a connection is closed instead of discarding an
// oversized frame.
const hardReadLimit = 4 * proto.MaxFrame

// handshakeLimit bounds a connection's frames until its token is checked
// (a Hello is under 2 KiB; an Attach carries a device description of at
// most about 40 KiB): nothing large is read from an unauthenticated peer.
const handshakeLimit = 64 << 10

// NewServer returns a device server.
func NewServer(o ServerOptions) *Server {
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 30 * time.Second
	}
	if o.AttachWait <= 0 {
		o.AttachWait = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 60 * time.Second
	}
	if o.Log == nil {
		o.Log = log.New(io.Discard, "", 0)
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 32
	}
	return &Server{o: o, auth: authLimiter{fails: map[string]*authFailures{}}}
}

func (s *Server) logf(format string, args ...any) { s.o.Log.Printf(format, args...) }

func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.hostAllowed(r.Host) {
		s.logf("%s: refused: Host %q is not this server's (DNS rebinding?); list it with --allow-host or set a token", r.RemoteAddr, proto.Printable(r.Host))
		http.Error(w, "tapml device server: unknown Host header", http.StatusMisdirectedRequest)
		return
	}
	if isUpgrade(r) {
		if n := s.conns.Add(1); n > int32(s.o.MaxConns) {
			s.conns.Add(-1)
			s.logf("%s: refused: %d connections open, the limit (--max-conns)", r.RemoteAddr, s.o.MaxConns)
			http.Error(w, "tapml device server: too many connections", http.StatusServiceUnavailable)
			return
		}
		defer s.conns.Add(-1)
	}
	switch {
	case r.URL.Path == "/attach" && s.o.Relay:
		s.attach(w, r)
	case r.URL.Path == "/page-error" && s.o.Relay:
		s.pageError(w, r)
	case isUpgrade(r):
		s.host(w, r)
	case s.o.Relay && s.o.Page != nil:
		s.o.Page.ServeHTTP(w, r)
	case r.URL.Path == "/":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "tapml device server (%s). Use it with: tapmlc run MODEL --target remote:ws://%s\n", s.deviceName(), r.Host)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) deviceName() string {
	if s.o.Workers != nil {
		return s.o.Workers.Info().Name
	}
	return "browser relay"
}

// readFrame reads one message. A message longer than proto.MaxFrame is
// read to its end and dropped, and its first bytes returned with tooLarge
// (so that the error reply can carry its id); one longer than
// hardReadLimit ends the connection.
func readFrame(ctx context.Context, c *websocket.Conn) (frame []byte, tooLarge bool, err error) {
	typ, r, err := c.Reader(ctx)
	if err != nil {
		return nil, false, err
	}
	b, err := io.ReadAll(io.LimitReader(r, proto.MaxFrame+1))
	if err != nil {
		return nil, false, err
	}
	if len(b) > proto.MaxFrame {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return nil, false, err
		}
		return b[:proto.HeaderSize], true, nil
	}
	if typ != websocket.MessageBinary {
		return append([]byte("text"), b...), false, nil // fails to decode: not "TM"
	}
	return b, false, nil
}

func (s *Server) write(c *websocket.Conn, frame []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.WriteTimeout)
	defer cancel()
	return c.Write(ctx, websocket.MessageBinary, frame)
}

// refuse replies with an error and closes the connection.
func (s *Server) refuse(c *websocket.Conn, id uint32, e *proto.Error) {
	_ = s.write(c, proto.Encode(id, e))
	reason := e.Message
	if len(reason) > 120 {
		reason = reason[:120]
	}
	status := websocket.StatusPolicyViolation
	if e.Code != proto.CodeAuth {
		status = websocket.StatusTryAgainLater
	}
	c.Close(status, reason)
}

// checkToken returns a refusal when the token is wrong, or when the peer's
// address failed too often lately (then the token is not even compared).
func (s *Server) checkToken(addr, token string) *proto.Error {
	if s.o.Token == "" {
		return nil
	}
	if wait := s.auth.blocked(addr); wait > 0 {
		return proto.Errorf(proto.CodeAuth, "too many wrong tokens from this address; try again in %s", wait.Round(time.Second))
	}
	if device.Authorized(s.o.Token, token) {
		return nil
	}
	s.auth.failed(addr)
	if token == "" {
		return proto.Errorf(proto.CodeAuth, "this server requires a token (add ?token=T to the device URL)")
	}
	return proto.Errorf(proto.CodeAuth, "wrong token")
}

// handshake reads a connection's first message.
func (s *Server) handshake(c *websocket.Conn) (uint32, proto.Msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.HandshakeTimeout)
	defer cancel()
	b, big, err := readFrame(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	if big {
		return proto.PeekID(b), nil, fmt.Errorf("a handshake of more than %d bytes", handshakeLimit)
	}
	id, m, err := proto.Decode(b)
	return id, m, err
}

func (s *Server) accept(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error) {
	// The default origin check refuses pages of other sites (cross-site
	// WebSocket hijacking); hosts (no Origin header) and the served page
	// (same origin) pass.
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.logf("%s: refused: %v", r.RemoteAddr, err)
		return nil, err
	}
	c.SetReadLimit(handshakeLimit)
	return c, nil
}

// host serves one host connection.
func (s *Server) host(w http.ResponseWriter, r *http.Request) {
	c, err := s.accept(w, r)
	if err != nil {
		return
	}
	defer c.CloseNow()
	addr := r.RemoteAddr
	id, m, err := s.handshake(c)
	if err != nil {
		s.logf("host %s: handshake failed: %v", addr, err)
		s.refuse(c, id, proto.Errorf(proto.CodeMalformed, "handshake: %v", err))
		return
	}
	h, ok := m.(*proto.Hello)
	if !ok {
		s.logf("host %s: refused: the first message is %s, not hello", addr, m.Type())
		s.refuse(c, id, proto.Errorf(proto.CodeMalformed, "the first message must be hello, not %s", m.Type()))
		return
	}
	if h.Version != proto.Version {
		s.logf("host %s: refused: protocol version %d", addr, h.Version)
		s.refuse(c, id, proto.Errorf(proto.CodeVersion, "the host speaks protocol version %d, this server %d", h.Version, proto.Version))
		return
	}
	client := proto.Printable(h.Client)
	if e := s.checkToken(addr, h.Token); e != nil {
		s.logf("host %s (%s): refused: %s", addr, client, e.Message)
		s.refuse(c, id, e)
		return
	}
	c.SetReadLimit(hardReadLimit)
	if s.o.Relay {
		s.relay(c, id, h, addr)
		return
	}
	s.serveWorker(c, id, client, addr)
}

// serveWorker passes a host session to a worker process, one request at a
// time. When the worker dies, the request it was handling gets a CodeLost
// error naming it, the host's connection is closed, and the pool starts
// another worker.
func (s *Server) serveWorker(c *websocket.Conn, id uint32, client, addr string) {
	w, e := s.o.Workers.acquire()
	if e != nil {
		s.logf("host %s (%s): refused: %s", addr, client, e.Message)
		s.refuse(c, id, e)
		return
	}
	s.logf("host %s (%s) connected (worker pid %d)", addr, client, w.cmd.Process.Pid)
	if err := s.write(c, proto.Encode(id, &proto.HelloOK{Version: proto.Version, Info: w.info})); err != nil {
		s.o.Workers.release(w)
		return
	}
	n := 0
	for {
		b, big, err := readFrame(context.Background(), c)
		if err != nil {
			s.logf("host %s disconnected after %d requests (%s)", addr, n, ended(err))
			s.o.Workers.release(w)
			return
		}
		n++
		var reply []byte
		switch {
		case big:
			reply = proto.Encode(proto.PeekID(b), proto.Errorf(proto.CodeTooLarge, "frame exceeds %d bytes", proto.MaxFrame))
		case len(b) == 0: // to a worker an empty frame ends the session: answer it here
			reply = proto.Encode(0, proto.Errorf(proto.CodeMalformed, "malformed request: an empty frame"))
		default:
			reply, err = w.roundTrip(b)
		}
		if err != nil {
			what := describe(b)
			how := s.o.Workers.lost(w, what)
			msg := fmt.Sprintf("the device worker process died (%s) while handling %s; this session's buffers are lost; the server goes on with a new worker", how, what)
			s.logf("host %s: %s", addr, msg)
			e := proto.Errorf(proto.CodeLost, "%s", msg)
			e.Index = ^uint32(0) // no command of a batch is blamed
			_ = s.write(c, proto.Encode(proto.PeekID(b), e))
			c.Close(websocket.StatusInternalError, "the device worker died")
			return
		}
		if err := s.write(c, reply); err != nil {
			s.logf("host %s: write failed: %v", addr, err)
			s.o.Workers.release(w)
			return
		}
	}
}

// ended describes, for the log, why a peer's connection ended.
func ended(err error) string {
	switch websocket.CloseStatus(err) {
	case websocket.StatusNormalClosure:
		return "closed normally"
	case -1:
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "the connection ended without a close message"
		}
		return err.Error()
	}
	var ce websocket.CloseError
	errors.As(err, &ce)
	return fmt.Sprintf("closed with status %d %s", int(ce.Code), ce.Reason)
}

// browserConn is an attached browser page.
type browserConn struct {
	c        *websocket.Conn
	info     proto.DeviceInfo
	addr     string
	wmu      sync.Mutex
	internal chan []byte   // replies to the server's own requests
	busy     chan struct{} // held by the host session using the page
	done     chan struct{} // closed when the page's connection ends

	mu     sync.Mutex
	cur    *relaySession
	nextID uint32
}

type relaySession struct {
	out  chan []byte
	done chan struct{}
}

func (b *browserConn) write(ctx context.Context, frame []byte) error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	return b.c.Write(ctx, websocket.MessageBinary, frame)
}

// attach serves a browser page's connection.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	c, err := s.accept(w, r)
	if err != nil {
		return
	}
	defer c.CloseNow()
	addr := r.RemoteAddr
	id, m, err := s.handshake(c)
	if err != nil {
		s.logf("page %s: attach failed: %v", addr, err)
		s.refuse(c, id, proto.Errorf(proto.CodeMalformed, "attach: %v", err))
		return
	}
	a, ok := m.(*proto.Attach)
	if !ok {
		s.refuse(c, id, proto.Errorf(proto.CodeMalformed, "the first message must be attach, not %s", m.Type()))
		return
	}
	if a.Version != proto.Version {
		s.logf("page %s: refused: protocol version %d", addr, a.Version)
		s.refuse(c, id, proto.Errorf(proto.CodeVersion, "the page speaks protocol version %d, this server %d (reload the page)", a.Version, proto.Version))
		return
	}
	if e := s.checkToken(addr, a.Token); e != nil {
		s.logf("page %s: refused: %s", addr, e.Message)
		s.refuse(c, id, e)
		return
	}
	c.SetReadLimit(hardReadLimit)
	bc := &browserConn{c: c, info: a.Info, addr: addr, internal: make(chan []byte, 16), busy: make(chan struct{}, 1), done: make(chan struct{}), nextID: proto.ServerIDBase}
	s.mu.Lock()
	old := s.browser
	if old != nil {
		select {
		case old.busy <- struct{}{}: // idle: the new page replaces it
			old.c.Close(websocket.StatusGoingAway, "another page attached")
		default:
			s.mu.Unlock()
			s.logf("page %s: refused: the attached page %s is in use", addr, old.addr)
			s.refuse(c, id, proto.Errorf(proto.CodeBusy, "another browser page is attached and in use"))
			return
		}
	}
	s.browser, s.failed = bc, nil
	s.mu.Unlock()
	defer func() {
		close(bc.done)
		s.mu.Lock()
		if s.browser == bc {
			s.browser = nil
		}
		s.mu.Unlock()
	}()
	if err := s.write(c, proto.Encode(id, &proto.OK{})); err != nil {
		return
	}
	s.logf("browser page %s attached: %s (%s)", addr, proto.Printable(a.Info.Name), proto.Printable(a.Info.Description))
	for {
		b, big, err := readFrame(context.Background(), c)
		if err != nil {
			s.logf("browser page %s detached (%s)", addr, ended(err))
			return
		}
		if big {
			s.logf("browser page %s: dropped a frame of more than %d bytes", addr, proto.MaxFrame)
			continue
		}
		if proto.PeekID(b) >= proto.ServerIDBase {
			select {
			case bc.internal <- b:
			default:
			}
			continue
		}
		bc.mu.Lock()
		rs := bc.cur
		bc.mu.Unlock()
		if rs == nil {
			continue // a reply for a host that left
		}
		select {
		case rs.out <- b:
		case <-rs.done:
		}
	}
}

// maxPageError bounds the message a failing page posts.
const maxPageError = 2048

// pageError records that a browser page could not start (it POSTs what it
// shows, with its token), so that hosts waiting for a page fail at once
// with the page's reason instead of waiting AttachWait. Only the page's
// own origin may post.
func (s *Server) pageError(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST the page's error", http.StatusMethodNotAllowed)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host && o != "https://"+r.Host {
		http.Error(w, "another origin", http.StatusForbidden)
		return
	}
	if e := s.checkToken(r.RemoteAddr, r.URL.Query().Get("token")); e != nil {
		http.Error(w, e.Message, http.StatusForbidden)
		return
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, maxPageError))
	msg := strings.ToValidUTF8(strings.TrimSpace(string(b)), "?")
	s.mu.Lock()
	s.failed = &pageFailure{addr: r.RemoteAddr, msg: msg}
	s.mu.Unlock()
	s.logf("browser page %s could not start: %s", r.RemoteAddr, msg)
	w.WriteHeader(http.StatusNoContent)
}

// waitBrowser returns the attached page once it is free, holding it.
func (s *Server) waitBrowser() (*browserConn, *proto.Error) {
	deadline := time.Now().Add(s.o.AttachWait)
	for {
		s.mu.Lock()
		bc, failed := s.browser, s.failed
		s.mu.Unlock()
		if bc == nil && failed != nil {
			return nil, proto.Errorf(proto.CodeUnavailable, "the browser page (%s) could not start: %s", failed.addr, failed.msg)
		}
		if bc != nil {
			select {
			case bc.busy <- struct{}{}:
				select {
				case <-bc.done: // it went away meanwhile
					<-bc.busy
				default:
					return bc, nil
				}
			default:
			}
		}
		if time.Now().After(deadline) {
			if bc == nil {
				return nil, proto.Errorf(proto.CodeUnavailable, "no browser page is attached to the server (open its http:// address in a browser with WebGPU) after waiting %s", s.o.AttachWait)
			}
			return nil, proto.Errorf(proto.CodeBusy, "the browser device serves another host (waited %s)", s.o.AttachWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reset asks the page to drop the last session's buffers and waits until
// every reply sent before has been drained.
func (s *Server) reset(bc *browserConn, rs *relaySession) error {
	bc.mu.Lock()
	id := bc.nextID
	bc.nextID++
	if bc.nextID == 0 {
		bc.nextID = proto.ServerIDBase
	}
	bc.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.o.WriteTimeout)
	defer cancel()
	if err := bc.write(ctx, proto.Encode(id, &proto.Reset{})); err != nil {
		return err
	}
	for {
		select {
		case f := <-bc.internal:
			if proto.PeekID(f) == id {
				return nil
			}
		case <-rs.out: // a stale reply of an earlier host
		case <-bc.done:
			return errors.New("the browser page went away")
		case <-ctx.Done():
			return fmt.Errorf("the browser page did not answer a reset within %s", s.o.WriteTimeout)
		}
	}
}

// relay passes a host session to the attached browser page.
func (s *Server) relay(c *websocket.Conn, id uint32, h *proto.Hello, addr string) {
	bc, e := s.waitBrowser()
	if e != nil {
		s.logf("host %s (%s): refused: %s", addr, proto.Printable(h.Client), e.Message)
		s.refuse(c, id, e)
		return
	}
	defer func() { <-bc.busy }()
	rs := &relaySession{out: make(chan []byte), done: make(chan struct{})}
	bc.mu.Lock()
	bc.cur = rs
	bc.mu.Unlock()
	defer func() {
		bc.mu.Lock()
		bc.cur = nil
		bc.mu.Unlock()
		close(rs.done)
		// Free the session's buffers on the page now; the next session's
		// reset drains the reply.
		ctx, cancel := context.WithTimeout(context.Background(), s.o.WriteTimeout)
		_ = bc.write(ctx, proto.Encode(finalResetID, &proto.Reset{}))
		cancel()
	}()
	if err := s.reset(bc, rs); err != nil {
		s.logf("host %s (%s): refused: %v", addr, proto.Printable(h.Client), err)
		s.refuse(c, id, proto.Errorf(proto.CodeUnavailable, "browser device: %v", err))
		return
	}
	var hw sync.Mutex // writes to the host
	writeHost := func(f []byte) error {
		hw.Lock()
		defer hw.Unlock()
		return s.write(c, f)
	}
	if err := writeHost(proto.Encode(id, &proto.HelloOK{Version: proto.Version, Info: bc.info})); err != nil {
		return
	}
	s.logf("host %s (%s) connected to browser page %s", addr, proto.Printable(h.Client), bc.addr)
	// page -> host
	go func() {
		for {
			select {
			case f := <-rs.out:
				if err := writeHost(f); err != nil {
					c.CloseNow()
					return
				}
			case <-bc.done:
				c.Close(websocket.StatusGoingAway, "the browser page went away")
				return
			case <-rs.done:
				return
			}
		}
	}()
	// host -> page
	n := 0
	for {
		b, big, err := readFrame(context.Background(), c)
		if err != nil {
			s.logf("host %s disconnected after %d requests (%s)", addr, n, ended(err))
			break
		}
		n++
		rid := proto.PeekID(b)
		if big || rid >= proto.ServerIDBase {
			e := proto.Errorf(proto.CodeTooLarge, "frame exceeds %d bytes", proto.MaxFrame)
			if !big {
				e = proto.Errorf(proto.CodeMalformed, "request id %d: host ids must be below %d", rid, uint32(proto.ServerIDBase))
			}
			if err := writeHost(proto.Encode(rid, e)); err != nil {
				break
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.o.WriteTimeout)
		err = bc.write(ctx, b)
		cancel()
		if err != nil {
			s.logf("host %s: the browser page is gone: %v", addr, err)
			c.Close(websocket.StatusGoingAway, "the browser page went away")
			break
		}
	}
	bc.mu.Lock()
	bc.cur = nil
	bc.mu.Unlock()
}
