package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/codegen/wgsl"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/runtime/remote/proto"
	"github.com/tapml/tapml/tensor"
)

// Default timeouts of a host connection.
const (
	// DefaultTimeout bounds the wait for each reply (a download, a sync, a
	// compile, a weight query, a free slot in the window of pipelined
	// requests) and each write to the connection.
	DefaultTimeout = 60 * time.Second
	// DefaultDialTimeout bounds connecting and the handshake (a relaying
	// server may wait for a browser page to attach within it).
	DefaultDialTimeout = 30 * time.Second
)

// Options configure a host connection.
type Options struct {
	// Token is sent in the handshake; servers started with --token
	// require it.
	Token string
	// Timeout bounds every wait for the device (default DefaultTimeout).
	// A connection that breaks is reported at once, whatever the timeout.
	Timeout time.Duration
	// DialTimeout bounds connecting and the handshake (default
	// DefaultDialTimeout).
	DialTimeout time.Duration
	// MaxBatch is the number of launches and frees sent in one frame
	// (default 64).
	MaxBatch int
	// Window bounds the requests sent whose replies have not come
	// (default 64).
	Window int
	// Client names the host in the server's log.
	Client string
	// Precision is the compute precision asked for (zero: f32). f16
	// compute or accumulation needs a device with shader-f16; another
	// device computes in f32 (Device.Precision says which).
	Precision runtime.Precision
}

// Device is a remote device seen from the host: a runtime.Device whose
// buffers live on the server's GPU (or in a browser page). Kernels are
// generated here with codegen/wgsl for the limits the device announced,
// at the precision it runs at (Precision): under f16 compute the tensors
// the IR types f32 are f16 on the device, rounded on upload, widened on
// download, and the kernels' bindings say so.
// Launches are pipelined: they are sent in batches without waiting, and a
// failure comes back from a later call, naming its node. Its methods are
// safe for concurrent use (they serialise on one lock).
type Device struct {
	url   string // for messages: no token, no options
	name  string
	info  proto.DeviceInfo
	lim   wgsl.Limits
	gen   wgsl.Options // what kernels are generated for, but the fault
	prec  runtime.Precision
	store devkit.Storage // f32 tensors as f16 under f16 compute
	opts  Options
	conn  *websocket.Conn

	mu         sync.Mutex
	nextID     uint32
	nextBuf    uint32
	nextKernel uint32
	batch      []proto.Cmd
	batchNodes []*ir.Node
	plans      map[devkit.PlanKey]*kplan
	bySrc      map[string]*kplan
	faults     devkit.Faults
	closed     bool
	broken     error
	stats      Stats

	// shared with the reader goroutine
	pmu        sync.Mutex
	pending    map[uint32]*call
	asyncErr   error
	slots      chan struct{}
	lostCh     chan struct{}
	lostErr    error
	lostDuring string
}

// Stats counts what crossed the connection.
type Stats struct {
	Requests      int   // frames sent
	BytesSent     int64 // tensor bytes uploaded
	WeightsSent   int   // weights uploaded (not found in the device's cache)
	WeightsCached int   // weights found in the device's cache
	Compiles      int   // kernels compiled on the device
	Launches      int
}

type call struct {
	what  string
	nodes []*ir.Node // a batch's node per command (nil for frees)
	async bool
	done  chan proto.Msg
}

// rbuf is the handle of a remote buffer (its id and bytes), shared by
// host-side aliases (reshape).
type rbuf = devkit.Buf[uint32]

// kplan is a node's kernel on the device: k as generated (its bindings
// typed as the IR types them) and stored, the same with the bindings typed
// as the device stores them (f16 for f32 under f16 compute).
type kplan struct {
	id     uint32
	k      *codegen.Kernel
	stored *codegen.Kernel
	err    error
}

var (
	_ runtime.Device         = (*Device)(nil)
	_ runtime.Preparer       = (*Device)(nil)
	_ runtime.WeightUploader = (*Device)(nil)
)

// Dial connects to the device server at rawURL (ws://HOST:PORT) with a
// token ("" for none) and the default options.
func Dial(rawURL, token string) (*Device, error) {
	return DialOptions(context.Background(), rawURL, Options{Token: token})
}

// ParseURL splits a device URL into the address to dial and the options it
// carries: ws://HOST:PORT[/PATH][?token=T][&timeout=DURATION]. The token
// and timeout parameters are removed from the address.
func ParseURL(rawURL string, o Options) (string, Options, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", o, fmt.Errorf("remote device URL %q: %v", redact(rawURL), err)
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return "", o, fmt.Errorf("remote device URL %q: the scheme must be ws:// or wss://", redact(rawURL))
	}
	if u.Host == "" {
		return "", o, fmt.Errorf("remote device URL %q has no host:port", redact(rawURL))
	}
	q := u.Query()
	if t := q.Get("token"); t != "" {
		o.Token = t
	}
	if s := q.Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return "", o, fmt.Errorf("remote device URL: timeout=%q is not a positive duration (like 90s)", s)
		}
		o.Timeout = d
	}
	q.Del("token")
	q.Del("timeout")
	u.RawQuery = q.Encode()
	return u.String(), o, nil
}

// redact hides a token in a URL for messages.
func redact(s string) string {
	if i := strings.Index(s, "token="); i >= 0 {
		j := strings.IndexByte(s[i:], '&')
		if j < 0 {
			return s[:i] + "token=REDACTED"
		}
		return s[:i] + "token=REDACTED" + s[i+j:]
	}
	return s
}

// DialOptions connects to a device server. The URL may carry token= and
// timeout= parameters (see ParseURL); they override o's.
func DialOptions(ctx context.Context, rawURL string, o Options) (*Device, error) {
	addr, o, err := ParseURL(rawURL, o)
	if err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 64
	}
	if o.Window <= 0 {
		o.Window = 64
	}
	if o.Client == "" {
		o.Client = "tapml"
	}
	show := addr
	if i := strings.IndexByte(show, '?'); i >= 0 {
		show = show[:i]
	}
	show = strings.TrimSuffix(show, "/")
	ctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, addr, nil)
	if err != nil {
		return nil, fmt.Errorf("remote device %s: cannot connect: %v (is `tapmlc serve` running there?)", show, err)
	}
	conn.SetReadLimit(proto.MaxFrame)
	hello := proto.Encode(1, &proto.Hello{Version: proto.Version, Token: o.Token, Client: o.Client})
	if err := conn.Write(ctx, websocket.MessageBinary, hello); err != nil {
		conn.CloseNow()
		return nil, fmt.Errorf("remote device %s: handshake: %v", show, err)
	}
	_, b, err := conn.Read(ctx)
	if err != nil {
		conn.CloseNow()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("remote device %s: no handshake reply within %s", show, o.DialTimeout)
		}
		return nil, fmt.Errorf("remote device %s: handshake: %v", show, closeReason(err))
	}
	_, m, err := proto.Decode(b)
	if err != nil {
		conn.CloseNow()
		return nil, fmt.Errorf("remote device %s: handshake: malformed reply: %v", show, err)
	}
	var info proto.DeviceInfo
	switch m := m.(type) {
	case *proto.HelloOK:
		if m.Version != proto.Version {
			conn.CloseNow()
			return nil, fmt.Errorf("remote device %s: protocol version mismatch: the server speaks version %d, this host %d", show, m.Version, proto.Version)
		}
		info = printableInfo(m.Info)
	case *proto.Error:
		conn.CloseNow()
		msg := proto.Printable(m.Message)
		switch m.Code {
		case proto.CodeAuth:
			return nil, fmt.Errorf("remote device %s: the server refused the connection: %s", show, msg)
		case proto.CodeVersion:
			return nil, fmt.Errorf("remote device %s: protocol version mismatch: %s", show, msg)
		}
		return nil, fmt.Errorf("remote device %s: %s", show, msg)
	default:
		conn.CloseNow()
		return nil, fmt.Errorf("remote device %s: handshake: unexpected %s reply", show, m.Type())
	}
	l := info.Limits
	prec := o.Precision.Normal()
	f16 := info.Has(proto.FeatureShaderF16)
	if !f16 {
		prec = runtime.F32
	}
	d := &Device{
		url:  show,
		name: fmt.Sprintf("remote(%s):%s", show, info.Name),
		info: info,
		lim: wgsl.Limits{
			MaxInvocationsPerWorkgroup:      int(l.MaxInvocationsPerWorkgroup),
			MaxWorkgroupSizeX:               int(l.MaxWorkgroupSizeX),
			MaxWorkgroupSizeY:               int(l.MaxWorkgroupSizeY),
			MaxWorkgroupSizeZ:               int(l.MaxWorkgroupSizeZ),
			MaxWorkgroupStorageSize:         int(l.MaxWorkgroupStorageSize),
			MaxWorkgroupsPerDimension:       int(l.MaxWorkgroupsPerDimension),
			MaxStorageBuffersPerShaderStage: int(l.MaxStorageBuffersPerShaderStage),
		},
		prec:    prec,
		store:   devkit.Storage{Half: prec.Half()},
		opts:    o,
		conn:    conn,
		nextID:  2,
		plans:   map[devkit.PlanKey]*kplan{},
		bySrc:   map[string]*kplan{},
		faults:  devkit.Faults{},
		pending: map[uint32]*call{},
		slots:   make(chan struct{}, o.Window),
		lostCh:  make(chan struct{}),
	}
	d.gen = wgsl.Options{Limits: d.lim, Features: wgsl.Features{F16: f16, Subgroups: info.Has(proto.FeatureSubgroups)}, Compute: prec.Compute, Accumulate: prec.Accumulate}
	go d.read()
	return d, nil
}

// printableInfo escapes the server's text in a device description, which
// ends up in names and messages.
func printableInfo(i proto.DeviceInfo) proto.DeviceInfo {
	for _, p := range []*string{&i.Name, &i.Backend, &i.Adapter, &i.Description} {
		*p = proto.Printable(*p)
	}
	i.Features = append([]string(nil), i.Features...)
	for j := range i.Features {
		i.Features[j] = proto.Printable(i.Features[j])
	}
	return i
}

// closeReason describes why a connection ended.
func closeReason(err error) string {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		if ce.Reason != "" {
			return fmt.Sprintf("the server closed the connection (%s)", proto.Printable(ce.Reason))
		}
		return fmt.Sprintf("the server closed the connection (status %d)", int(ce.Code))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return "the connection broke without a close message (the server stopped or the network failed)"
	}
	msg := err.Error()
	for _, p := range []string{"failed to get reader: ", "failed to read frame header: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// Name identifies the device: remote(URL):DEVICE.
func (d *Device) Name() string { return d.name }

// Info is the device's description from the handshake.
func (d *Device) Info() proto.DeviceInfo { return d.info }

// ShaderF16 reports whether the device was created with shader-f16 (it
// compiles `enable f16;`).
func (d *Device) ShaderF16() bool { return d.info.Has(proto.FeatureShaderF16) }

// Precision is the precision the device computes at: Options.Precision
// where the device has shader-f16, else f32.
func (d *Device) Precision() runtime.Precision { return d.prec }

// Limits are the limits kernels are generated for.
func (d *Device) Limits() wgsl.Limits { return d.lim }

// BufferLimits are the buffer and binding limits the device reported (a
// server's device or a browser's; both pool buffers by size class, bound
// whole).
func (d *Device) BufferLimits() runtime.BufferLimits {
	l := runtime.BufferLimits{MaxBuffer: d.info.Limits.MaxBufferSize, MaxBinding: d.info.Limits.MaxStorageBufferBindingSize}
	tight := l.MaxBuffer
	if tight == 0 || (l.MaxBinding > 0 && l.MaxBinding < tight) {
		tight = l.MaxBinding
	}
	if tight > 0 {
		l.MaxTensor = int64(devkit.LargestFitting(tight))
	}
	return l
}

// Stats returns counters of the connection.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// SetFault injects a codegen/wgsl fault into the kernel of node id (""
// removes it). For tests of the carving and migration tools only.
func (d *Device) SetFault(id int, fault string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.Set(id, fault)
}

// read receives replies until the connection ends.
func (d *Device) read() {
	for {
		_, b, err := d.conn.Read(context.Background())
		if err != nil {
			d.lose(errors.New(closeReason(err)))
			return
		}
		id, m, err := proto.Decode(b)
		if err != nil {
			d.lose(fmt.Errorf("malformed reply: %v", err))
			return
		}
		if e, ok := m.(*proto.Error); ok {
			e.Message = proto.Printable(e.Message)
		}
		d.pmu.Lock()
		c := d.pending[id]
		delete(d.pending, id)
		if c != nil && c.async {
			if e, ok := m.(*proto.Error); ok && d.asyncErr == nil {
				d.asyncErr = d.failure(c, e)
			}
		}
		d.pmu.Unlock()
		if c == nil {
			d.lose(fmt.Errorf("reply to request %d, which is not pending", id))
			return
		}
		<-d.slots
		if !c.async {
			c.done <- m
		}
	}
}

// lose records that the connection ended, naming the oldest request that
// had no reply.
func (d *Device) lose(cause error) {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	if d.lostErr != nil {
		return
	}
	d.lostErr = cause
	d.lostDuring = d.inFlight("")
	close(d.lostCh)
}

// inFlight describes the oldest request without a reply, preferring
// launches, downloads and the like to batches that only free buffers; ""
// (or what, if given) when there are none (must hold d.pmu).
func (d *Device) inFlight(what string) string {
	oldest, oldestFree := uint32(0), uint32(0)
	var during, free string
	for id, c := range d.pending {
		if c.what == freeWhat {
			if oldestFree == 0 || id < oldestFree {
				oldestFree, free = id, c.what
			}
		} else if oldest == 0 || id < oldest {
			oldest, during = id, c.what
		}
	}
	switch {
	case during != "":
		return during
	case what != "":
		return what
	}
	return free
}

const freeWhat = "free of buffers"

func (d *Device) lostError(what string) error {
	d.pmu.Lock()
	during, cause := d.lostDuring, d.lostErr
	d.pmu.Unlock()
	if during == "" || (during == freeWhat && what != "") {
		during = what
	}
	return runtime.Lost(fmt.Errorf("remote device %s: connection lost during %s: %v", d.url, during, cause))
}

// failure turns an error reply into an error naming the node concerned.
// A CodeLost reply (the server's device worker died) means the session is
// over: the error matches runtime.ErrDeviceLost.
func (d *Device) failure(c *call, e *proto.Error) error {
	if e.Code == proto.CodeLost {
		return runtime.Lost(fmt.Errorf("remote device %s: %s failed: %s", d.url, c.what, e.Message))
	}
	if int(e.Index) < len(c.nodes) && c.nodes[e.Index] != nil {
		return &runtime.KernelError{Device: d.name, Node: c.nodes[e.Index], Err: errors.New(e.Message)}
	}
	return fmt.Errorf("remote device %s: %s failed: %s", d.url, c.what, e.Message)
}

// usable reports an error when the device cannot take more work: closed,
// timed out, disconnected, or an earlier pipelined request failed (that
// error is reported once).
func (d *Device) usable(what string) error {
	if d.closed {
		return fmt.Errorf("remote device %s is closed", d.url)
	}
	if d.broken != nil {
		return d.broken
	}
	select {
	case <-d.lostCh:
		return d.lostError(what)
	default:
	}
	d.pmu.Lock()
	err := d.asyncErr
	d.asyncErr = nil
	d.pmu.Unlock()
	return err
}

// timedOut marks the device unusable after a wait ran past the timeout.
func (d *Device) timedOut(what string) error {
	d.pmu.Lock()
	during := d.inFlight(what)
	d.pmu.Unlock()
	d.broken = runtime.Lost(fmt.Errorf("remote device %s: no reply within %s to %s (the device is hung or the network is down; the connection was closed)",
		d.url, d.opts.Timeout, during))
	d.conn.CloseNow()
	return d.broken
}

// send sends a request; async requests report failures later, others are
// waited for with wait.
func (d *Device) send(m proto.Msg, what string, nodes []*ir.Node, async bool) (*call, error) {
	if d.broken != nil {
		return nil, d.broken
	}
	timer := time.NewTimer(d.opts.Timeout)
	defer timer.Stop()
	select {
	case d.slots <- struct{}{}:
	case <-d.lostCh:
		return nil, d.lostError(what)
	case <-timer.C:
		return nil, d.timedOut(what)
	}
	id := d.nextID
	d.nextID++
	if d.nextID >= proto.ServerIDBase {
		d.nextID = 1
	}
	c := &call{what: what, nodes: nodes, async: async, done: make(chan proto.Msg, 1)}
	d.pmu.Lock()
	d.pending[id] = c
	d.pmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.Timeout)
	err := d.conn.Write(ctx, websocket.MessageBinary, proto.Encode(id, m))
	timedOut := ctx.Err() != nil
	cancel()
	d.stats.Requests++
	if err != nil {
		select {
		case <-d.lostCh:
			return nil, d.lostError(what)
		default:
		}
		if timedOut {
			return nil, d.timedOut(what)
		}
		d.lose(fmt.Errorf("writing failed: %v", err))
		return nil, d.lostError(what)
	}
	return c, nil
}

// wait waits for the reply of a request.
func (d *Device) wait(c *call) (proto.Msg, error) {
	timer := time.NewTimer(d.opts.Timeout)
	defer timer.Stop()
	select {
	case m := <-c.done:
		if e, ok := m.(*proto.Error); ok {
			return nil, e
		}
		return m, nil
	case <-d.lostCh:
		// A reply that came before the connection ended still counts.
		select {
		case m := <-c.done:
			if e, ok := m.(*proto.Error); ok {
				return nil, e
			}
			return m, nil
		default:
		}
		return nil, d.lostError(c.what)
	case <-timer.C:
		return nil, d.timedOut(c.what)
	}
}

// request sends a request and waits for its reply.
func (d *Device) request(m proto.Msg, what string) (proto.Msg, error) {
	c, err := d.send(m, what, nil, false)
	if err != nil {
		return nil, err
	}
	r, err := d.wait(c)
	var e *proto.Error
	if errors.As(err, &e) {
		if e.Code == proto.CodeLost {
			return nil, d.failure(c, e)
		}
		return nil, fmt.Errorf("remote device %s: %s failed: %w", d.url, what, e)
	}
	return r, err
}

// flush sends the batched launches and frees.
func (d *Device) flush() error {
	if len(d.batch) == 0 {
		return nil
	}
	what := freeWhat
	for _, n := range d.batchNodes {
		if n != nil {
			what = "launch of node " + n.String()
			break
		}
	}
	cmds, nodes := d.batch, d.batchNodes
	d.batch, d.batchNodes = nil, nil
	_, err := d.send(&proto.Batch{Cmds: cmds}, what, nodes, true)
	return err
}

func (d *Device) newBuf() uint32 {
	d.nextBuf++
	return d.nextBuf
}

func wireShape(s []int) []uint32 {
	out := make([]uint32, len(s))
	for i, x := range s {
		out[i] = uint32(x)
	}
	return out
}

// wireTensor checks a tensor to upload and returns it as the device
// stores it: its dtype on the wire and its bytes (f32 rounded to f16 under
// f16 compute).
func (d *Device) wireTensor(t *tensor.Tensor) (proto.DType, []byte, error) {
	if t == nil {
		return 0, nil, fmt.Errorf("remote device %s: upload of a nil tensor", d.url)
	}
	if err := devkit.CheckGPUTensor(t); err != nil {
		return 0, nil, fmt.Errorf("remote device %s: upload of %w", d.url, err)
	}
	stored := t.DType
	if d.store.Halved(t.DType) {
		stored = ir.F16
	}
	dt, ok := proto.FromIR(stored)
	if !ok {
		return 0, nil, fmt.Errorf("remote device %s: upload of %s: the protocol has no dtype %s", d.url, t, t.DType)
	}
	for _, x := range t.Shape {
		if x < 0 || x > proto.MaxDim {
			return 0, nil, fmt.Errorf("remote device %s: upload of %s: dimension %d out of range", d.url, t, x)
		}
	}
	if len(t.Shape) > proto.MaxRank {
		return 0, nil, fmt.Errorf("remote device %s: upload of %s: rank above %d", d.url, t, proto.MaxRank)
	}
	return dt, d.store.Encode(t), nil
}

// sendTensor uploads data, a tensor of dtype dt and shape, to buffer id in
// chunks, pipelined.
func (d *Device) sendTensor(id uint32, dt proto.DType, shape []int, data []byte, cache bool, key [32]byte, what string) error {
	wshape := wireShape(shape)
	off := 0
	for {
		n := min(len(data)-off, proto.MaxChunk)
		m := &proto.Upload{Buf: id, Cache: cache, Hash: key, DType: dt, Shape: wshape, Offset: uint64(off), Data: data[off : off+n]}
		if _, err := d.send(m, what, nil, true); err != nil {
			return err
		}
		off += n
		if off >= len(data) {
			break
		}
	}
	d.stats.BytesSent += int64(len(data))
	return nil
}

// Upload copies a tensor to a new device buffer (pipelined: a failure is
// reported by a later call).
func (d *Device) Upload(t *tensor.Tensor) (*runtime.Buffer, error) {
	dt, data, err := d.wireTensor(t)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	what := fmt.Sprintf("upload of %s%v", t.DType, t.Shape)
	if err := d.usable(what); err != nil {
		return nil, err
	}
	if err := d.flush(); err != nil {
		return nil, err
	}
	id := d.newBuf()
	if err := d.sendTensor(id, dt, t.Shape, data, false, [32]byte{}, what); err != nil {
		return nil, err
	}
	return devkit.Wrap(d, devkit.NewBuf(id, uint64(len(data))), t.DType, t.Shape), nil
}

// UploadWeight uploads a weight unless the device has it cached: the host
// asks by content hash first and never sends a cached weight again.
func (d *Device) UploadWeight(name string, t *tensor.Tensor) (*runtime.Buffer, error) {
	dt, data, err := d.wireTensor(t)
	if err != nil {
		return nil, err
	}
	key := proto.WeightKey(dt, wireShape(t.Shape), data)
	d.mu.Lock()
	defer d.mu.Unlock()
	what := fmt.Sprintf("upload of weight @%s", name)
	if err := d.usable(what); err != nil {
		return nil, err
	}
	if err := d.flush(); err != nil {
		return nil, err
	}
	id := d.newBuf()
	r, err := d.request(&proto.Query{Items: []proto.QueryItem{{Buf: id, Hash: key}}}, "query of weight @"+name)
	if err != nil {
		return nil, err
	}
	q, ok := r.(*proto.QueryOK)
	if !ok || len(q.Found) != 1 {
		return nil, fmt.Errorf("remote device %s: query of weight @%s: unexpected reply", d.url, name)
	}
	if q.Found[0] {
		d.stats.WeightsCached++
	} else {
		if err := d.sendTensor(id, dt, t.Shape, data, true, key, what); err != nil {
			return nil, err
		}
		d.stats.WeightsSent++
	}
	return devkit.Wrap(d, devkit.NewBuf(id, uint64(len(data))), t.DType, t.Shape), nil
}

// Download copies a buffer to the host, after the work before it.
func (d *Device) Download(b *runtime.Buffer) (*tensor.Tensor, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h, err := devkit.Handle[uint32](d, b)
	if err != nil {
		return nil, fmt.Errorf("remote device %s: download: %w", d.url, err)
	}
	what := fmt.Sprintf("download of %s%v", b.DType, b.Shape)
	if err := d.usable(what); err != nil {
		return nil, err
	}
	if err := d.flush(); err != nil {
		return nil, err
	}
	t := tensor.New(b.DType, b.Shape)
	raw := t.Data // as the device stores it
	if d.store.Halved(b.DType) {
		raw = make([]byte, len(t.Data)/2)
	}
	for off := 0; off < len(raw); {
		n := min(len(raw)-off, proto.MaxChunk)
		r, err := d.request(&proto.Download{Buf: h.B, Offset: uint64(off), Length: uint32(n)}, what)
		if err != nil {
			if perr := d.usable(what); perr != nil {
				return nil, perr // the launch that failed before, naming its node
			}
			return nil, err
		}
		data, ok := r.(*proto.Data)
		if !ok || len(data.Data) != n {
			return nil, fmt.Errorf("remote device %s: %s: unexpected reply", d.url, what)
		}
		copy(raw[off:], data.Data)
		off += n
	}
	if d.store.Halved(b.DType) {
		devkit.FromHalf(raw, t.Data)
	}
	return t, nil
}

// Sync waits until the device has finished all work sent.
func (d *Device) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable("sync"); err != nil {
		return err
	}
	if err := d.flush(); err != nil {
		return err
	}
	if _, err := d.request(&proto.Sync{}, "sync"); err != nil {
		if perr := d.usable("sync"); perr != nil {
			return perr
		}
		return err
	}
	return d.usable("sync")
}

// Free releases a buffer once no alias uses it (batched with launches).
func (d *Device) Free(b *runtime.Buffer) {
	if b == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h := devkit.Take[uint32](d, b)
	if h == nil || !h.Drop() || d.closed {
		return
	}
	d.batch = append(d.batch, proto.Cmd{Kind: proto.CmdFree, Buf: h.B})
	d.batchNodes = append(d.batchNodes, nil)
	if len(d.batch) >= d.opts.MaxBatch && d.usable("free") == nil {
		_ = d.flush() // a broken connection is reported by the next call
	}
}

// Close frees what is left and closes the connection; the server frees the
// session's buffers.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	select {
	case <-d.lostCh:
		d.closed = true
		d.conn.CloseNow()
		return nil
	default:
	}
	if d.broken == nil {
		_ = d.flush()
	}
	d.closed = true
	return d.conn.Close(websocket.StatusNormalClosure, "")
}

func wireBinding(b codegen.Binding) (proto.Binding, error) {
	dt, ok := proto.FromIR(b.Type.DType)
	if !ok || !b.Type.Shape.IsStatic() {
		return proto.Binding{}, fmt.Errorf("binding %d is %s", b.Index, b.Type)
	}
	acc := map[codegen.Access]uint8{codegen.Read: proto.AccessRead, codegen.Write: proto.AccessWrite, codegen.ReadWrite: proto.AccessReadWrite}
	a, ok := acc[b.Access]
	if !ok {
		return proto.Binding{}, fmt.Errorf("binding %d has access %q", b.Index, b.Access)
	}
	return proto.Binding{Access: a, Input: int32(b.Input), Output: int32(b.Output), DType: dt, Shape: wireShape(b.Type.Shape.Sizes())}, nil
}

// planFor generates node n's kernel for the input types and compiles it on
// the device (once per distinct kernel).
func (d *Device) planFor(n *ir.Node, in, out []ir.Type) (*kplan, error) {
	key := devkit.KeyOf(n, in, d.faults[n.ID])
	if p, ok := d.plans[key]; ok {
		return p, p.err
	}
	opts := d.gen
	opts.Fault = key.Fault
	k, err := wgsl.Generate(n, in, out, opts)
	if err != nil {
		return nil, err
	}
	sk := d.store.Kernel(k)
	m := &proto.Compile{Op: k.Op.String(), Language: "wgsl", Entry: k.Entry, Source: k.Source}
	for i := range 3 {
		m.Workgroup[i], m.Grid[i] = uint32(k.WorkgroupSize[i]), uint32(k.Grid[i])
	}
	for i, b := range sk.Bindings {
		if b.Index != i {
			return nil, fmt.Errorf("kernel binding %d has index %d", i, b.Index)
		}
		wb, err := wireBinding(b)
		if err != nil {
			return nil, err
		}
		m.Bindings = append(m.Bindings, wb)
	}
	if len(k.Source) > proto.MaxSource {
		return nil, fmt.Errorf("kernel source of %d bytes exceeds the protocol's %d", len(k.Source), proto.MaxSource)
	}
	src := string(proto.Encode(0, m)) // the kernel without its node: shared by nodes with the same code
	if p, ok := d.bySrc[src]; ok {
		p2 := &kplan{id: p.id, k: k, stored: sk, err: p.err}
		d.plans[key] = p2
		return p2, p2.err
	}
	d.nextKernel++
	m.Kernel, m.Node = d.nextKernel, uint32(n.ID)
	p := &kplan{id: m.Kernel, k: k, stored: sk}
	if _, err := d.request(m, "compile of node "+n.String()); err != nil {
		var e *proto.Error
		if !errors.As(err, &e) {
			return nil, err // the connection failed
		}
		p.err = errors.New(e.Message) // the device rejected the kernel: remember
	}
	d.stats.Compiles++
	d.bySrc[src] = p
	d.plans[key] = p
	return p, p.err
}

// Prepare compiles the kernels of nodes whose input types are static, so
// that a kernel the device rejects is reported before the run.
func (d *Device) Prepare(m *ir.Module, f *ir.Function, nodes []*ir.Node) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable("prepare"); err != nil {
		return err
	}
	if err := d.flush(); err != nil {
		return err
	}
	return devkit.Prepare(d.name, nodes, d.isView, func(n *ir.Node, in []ir.Type) error {
		_, err := d.planFor(n, in, nil)
		return err
	})
}

// isView reports whether node n runs as a view of its input instead of a
// kernel (must hold d.mu).
func (d *Device) isView(n *ir.Node) bool { return devkit.IsView(n, d.faults[n.ID]) }

func (d *Device) lostOrBroken() bool {
	if d.broken != nil {
		return true
	}
	select {
	case <-d.lostCh:
		return true
	default:
		return false
	}
}

// Launch sends node n's kernel on inputs in (batched). kv_write updates its
// cache in place and returns the cache buffer itself; reshape returns a
// buffer sharing its input's remote buffer.
func (d *Device) Launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	if n == nil {
		return nil, fmt.Errorf("remote device %s: launch of a nil node", d.url)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	what := "launch of node " + n.String()
	if err := d.usable(what); err != nil {
		return nil, err
	}
	res, err := d.launch(n, in, outs)
	if err != nil && d.lostOrBroken() {
		return nil, err
	}
	return res, devkit.NodeError(d.name, n, err)
}

func (d *Device) launch(n *ir.Node, in []*runtime.Buffer, outs []ir.Type) ([]*runtime.Buffer, error) {
	hs := make([]*rbuf, len(in))
	if err := devkit.Handles(d, in, hs); err != nil {
		return nil, err
	}
	if d.isView(n) {
		return devkit.View(d, n, in, hs, outs)
	}
	if len(in) > proto.MaxOperands {
		return nil, fmt.Errorf("%d inputs exceed the protocol's %d", len(in), proto.MaxOperands)
	}
	p, err := d.planFor(n, devkit.Types(in), outs)
	if err != nil {
		return nil, err
	}
	k := p.k
	if err := devkit.CheckBindings(p.stored, hs); err != nil {
		return nil, err
	}
	// The device makes the outputs when it runs the launch: here they are
	// new buffer ids, of the bytes the device stores.
	bound := make([]*rbuf, len(k.Bindings))
	for i, b := range p.stored.Bindings {
		if b.Input >= 0 {
			bound[i] = hs[b.Input]
		} else {
			bound[i] = devkit.NewBuf(d.newBuf(), uint64(b.Type.Bytes()))
		}
	}
	res := devkit.Outputs(d, k, in, bound)
	cmd := proto.Cmd{Kind: proto.CmdLaunch, Kernel: p.id, Node: uint32(n.ID), In: make([]uint32, len(in)), Out: make([]uint32, len(res))}
	for i, h := range hs {
		cmd.In[i] = h.B
	}
	for i, b := range k.Bindings {
		if b.Output >= 0 {
			cmd.Out[b.Output] = bound[i].B
		}
	}
	d.batch = append(d.batch, cmd)
	d.batchNodes = append(d.batchNodes, n)
	d.stats.Launches++
	if len(d.batch) >= d.opts.MaxBatch {
		if err := d.flush(); err != nil {
			return nil, err
		}
	}
	return res, nil
}
