//go:build !js

package remote

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/remote/device"
	"github.com/tapml/tapml/runtime/remote/proto"
	"github.com/tapml/tapml/runtime/vulkan"
	"github.com/tapml/tapml/runtime/webgpu"
)

// A native server runs each host session's GPU work in a worker process
// (the same binary, started by Workers.Command), so that a crash inside
// the driver (wgpu aborts the process on some inputs; naga can overflow its
// stack) costs that session, not the server or other sessions. A worker
// serves one session at a time; between sessions it frees the session's
// buffers and its device's buffer pool (so the next session's buffers come
// zeroed from wgpu; the Vulkan device zeroes the freed memory) and keeps
// its weight cache and pipelines. The server keeps idle workers for reuse,
// starts new ones up to MaxSessions, and replaces a worker that died.
//
// Server and worker talk over two pipes (the worker's file descriptors 3
// and 4, so that what the driver prints on stdout and stderr cannot mix in):
// frames of the remote protocol, each preceded by its length (u32
// little-endian). The worker's first frame is a HelloOK with its device's
// description. A request frame gets one reply frame; an empty frame ends
// the host session and is answered by an empty frame once the session is
// cleaned up.

// WorkerEnv is set (to "1") in the environment of worker processes.
const WorkerEnv = "TAPML_DEVICE_WORKER"

// maxWorkerFrame bounds a frame on the worker pipes (a reply is at most a
// Data of MaxChunk bytes plus its header).
const maxWorkerFrame = proto.MaxFrame

func writeWorkerFrame(w io.Writer, frame []byte) error {
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(frame)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(frame)
	return err
}

func readWorkerFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint32(n[:])
	if size > maxWorkerFrame {
		return nil, fmt.Errorf("worker frame of %d bytes exceeds %d", size, maxWorkerFrame)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// ServeWorker is a worker process's loop: it answers the server's frames
// with core's sessions, one host session after another, until the request
// pipe ends. Ending a session frees its buffers and the backend's pool
// (device.PoolReleaser).
func ServeWorker(requests io.Reader, replies io.Writer, core *device.Core) error {
	in := bufio.NewReaderSize(requests, 1<<20)
	out := bufio.NewWriterSize(replies, 1<<20)
	send := func(frame []byte) error {
		if err := writeWorkerFrame(out, frame); err != nil {
			return err
		}
		return out.Flush()
	}
	if err := send(proto.Encode(0, &proto.HelloOK{Version: proto.Version, Info: core.Info()})); err != nil {
		return err
	}
	sess := core.NewSession()
	for {
		frame, err := readWorkerFrame(in)
		if errors.Is(err, io.EOF) {
			sess.Close()
			return nil
		}
		if err != nil {
			return err
		}
		if len(frame) == 0 {
			sess.Close()
			sess = core.NewSession()
			err = send(nil)
		} else {
			err = send(sess.Handle(frame))
		}
		if err != nil {
			return err
		}
	}
}

// WorkerPipes returns the worker's ends of the pipes to the server (file
// descriptors 3 and 4), for a worker's main function.
func WorkerPipes() (requests io.Reader, replies io.Writer) {
	return os.NewFile(3, "requests"), os.NewFile(4, "replies")
}

// worker is a running worker process, seen from the server.
type worker struct {
	cmd  *exec.Cmd
	req  *os.File
	rep  *os.File
	in   *bufio.Reader
	info proto.DeviceInfo
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done
}

// startWorker starts a worker process and reads its device description.
func startWorker(command func() *exec.Cmd) (*worker, error) {
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, err
	}
	cmd := command()
	cmd.ExtraFiles = []*os.File{reqR, repW}
	// The server logs a worker's death; the Go runtime's dump of every
	// goroutine after a driver abort would only bury that line.
	cmd.Env = append(cmd.Environ(), WorkerEnv+"=1", "GOTRACEBACK=none")
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stderr
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	err = cmd.Start()
	reqR.Close()
	repW.Close()
	if err != nil {
		reqW.Close()
		repR.Close()
		return nil, fmt.Errorf("starting a device worker: %w", err)
	}
	w := &worker{cmd: cmd, req: reqW, rep: repR, in: bufio.NewReaderSize(repR, 1<<20), done: make(chan struct{})}
	go func() {
		w.err = cmd.Wait()
		close(w.done)
	}()
	hello, err := readWorkerFrame(w.in)
	if err != nil {
		w.kill()
		return nil, fmt.Errorf("the device worker did not start (%s)", w.exit())
	}
	_, m, err := proto.Decode(hello)
	switch m := m.(type) {
	case *proto.HelloOK:
		w.info = m.Info
		return w, nil
	case *proto.Error:
		w.kill()
		return nil, fmt.Errorf("the device worker could not open its device: %s", m.Message)
	}
	w.kill()
	return nil, fmt.Errorf("the device worker sent a malformed first frame: %v", err)
}

// roundTrip passes one request (or an empty frame, the end of a session)
// to the worker and returns its reply; an error means the worker is gone.
func (w *worker) roundTrip(frame []byte) ([]byte, error) {
	if err := writeWorkerFrame(w.req, frame); err != nil {
		return nil, err
	}
	return readWorkerFrame(w.in)
}

// kill stops the worker: closing its request pipe ends a healthy one; one
// that is dying gets a moment to finish (so that its own exit status is
// reported), then it is killed.
func (w *worker) kill() {
	w.req.Close()
	select {
	case <-w.done:
	case <-time.After(2 * time.Second):
		w.cmd.Process.Kill()
		<-w.done
	}
	w.rep.Close()
}

// exit describes how the worker ended, after kill: "signal: aborted",
// "exit status 2", ...
func (w *worker) exit() string {
	<-w.done
	if w.err == nil {
		return "exited"
	}
	return w.err.Error()
}

// Workers is a native server's pool of worker processes.
type Workers struct {
	command func() *exec.Cmd
	max     int
	info    proto.DeviceInfo
	logf    func(string, ...any)

	mu     sync.Mutex
	idle   []*worker
	live   int // started and not known dead: idle, busy or starting
	closed bool
}

// WorkerOptions configure a pool of worker processes.
type WorkerOptions struct {
	// Command returns the command of a worker process: the same binary in
	// its worker mode (`tapmlc serve` runs itself with a hidden
	// subcommand). The pool adds the pipes and WorkerEnv.
	Command func() *exec.Cmd
	// MaxSessions bounds the host sessions served at once, which is the
	// number of worker processes (default 4).
	MaxSessions int
	// Log receives a line when a worker dies or is replaced (nil:
	// discarded).
	Log func(format string, args ...any)
}

// StartWorkers starts the first worker (so that a device that cannot
// open is reported at once) and returns the pool.
func StartWorkers(o WorkerOptions) (*Workers, error) {
	if o.MaxSessions <= 0 {
		o.MaxSessions = 4
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	w, err := startWorker(o.Command)
	if err != nil {
		return nil, err
	}
	return &Workers{command: o.Command, max: o.MaxSessions, info: w.info, logf: o.Log, idle: []*worker{w}, live: 1}, nil
}

// Info describes the workers' device.
func (p *Workers) Info() proto.DeviceInfo { return p.info }

// acquireWait bounds how long a host waits for a worker when MaxSessions
// are busy (or a replacement is starting).
const acquireWait = 10 * time.Second

// acquire returns an idle worker or starts one, up to MaxSessions; when
// all are busy it waits up to acquireWait for one to be released.
func (p *Workers) acquire() (*worker, *proto.Error) {
	deadline := time.Now().Add(acquireWait)
	for {
		w, start, e := p.take()
		if e != nil {
			return nil, e
		}
		if w != nil {
			return w, nil
		}
		if start {
			w, err := startWorker(p.command)
			if err != nil {
				p.mu.Lock()
				p.live--
				p.mu.Unlock()
				p.logf("%v", err)
				return nil, proto.Errorf(proto.CodeUnavailable, "the server could not start a device worker")
			}
			return w, nil
		}
		if time.Now().After(deadline) {
			return nil, proto.Errorf(proto.CodeBusy, "the server serves %d host sessions, its limit (--max-sessions); waited %s", p.max, acquireWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// take returns an idle worker, or says to start one (counted as live), or
// neither when all are busy.
func (p *Workers) take() (w *worker, start bool, e *proto.Error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false, proto.Errorf(proto.CodeUnavailable, "the server is stopping")
	}
	if n := len(p.idle); n > 0 {
		w = p.idle[n-1] // the most recently used: its caches are warm
		p.idle = p.idle[:n-1]
		return w, false, nil
	}
	if p.live < p.max {
		p.live++
		return nil, true, nil
	}
	return nil, false, nil
}

// release ends w's host session and keeps it for the next one; a worker
// that fails to clean up is dropped.
func (p *Workers) release(w *worker) {
	if reply, err := w.roundTrip(nil); err != nil || len(reply) != 0 {
		p.lost(w, "ending a session")
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		w.kill()
		return
	}
	p.idle = append(p.idle, w)
	p.mu.Unlock()
}

// lost drops a worker that died (or misbehaved) and starts a replacement
// when no idle one is left, so that the next host is served at once. It
// returns how the worker ended.
func (p *Workers) lost(w *worker, during string) string {
	w.kill()
	how := w.exit()
	p.logf("device worker (pid %d) died during %s (%s); starting another", w.cmd.Process.Pid, during, how)
	p.mu.Lock()
	p.live--
	warm := !p.closed && len(p.idle) == 0 && p.live < p.max
	if warm {
		p.live++
	}
	p.mu.Unlock()
	if warm {
		go func() {
			nw, err := startWorker(p.command)
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil || p.closed {
				p.live--
				if err != nil {
					p.logf("%v", err)
				} else {
					go nw.kill()
				}
				return
			}
			p.idle = append(p.idle, nw)
		}()
	}
	return how
}

// Close stops the idle workers; busy ones stop when their session ends.
func (p *Workers) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, w := range idle {
		w.kill()
	}
}

// describe names a request for the message of a worker that died while
// handling it.
func describe(frame []byte) string {
	id, m, err := proto.Decode(frame)
	if err != nil {
		return fmt.Sprintf("request %d", id)
	}
	switch m := m.(type) {
	case *proto.Compile:
		return fmt.Sprintf("the compile request %d (kernel %d of node #%d, %s)", id, m.Kernel, m.Node, proto.Printable(m.Op))
	case *proto.Batch:
		for _, c := range m.Cmds {
			if c.Kind == proto.CmdLaunch {
				return fmt.Sprintf("the batch request %d (launches from node #%d)", id, c.Node)
			}
		}
	}
	return fmt.Sprintf("the %s request %d", m.Type(), id)
}

// UncheckedKernelsEnv, set to "1" in a worker's environment, turns off
// device.CheckKernel there, so that tests can prove a driver crash costs
// one session. Never set it on a real server.
const UncheckedKernelsEnv = "TAPML_UNSAFE_UNCHECKED_KERNELS"

// NativeWorkerOptions configure a worker process's device.
type NativeWorkerOptions struct {
	Backend string // webgpu backend: vulkan (default) or gl
	// Vulkan serves tapml's own Vulkan device (device.Vulkan) instead of
	// WebGPU; Backend is then unused.
	Vulkan      bool
	MemoryBytes int64 // the session's memory budget (device.Options)
	CacheBytes  int64 // idle cached weights kept (device.Options)
	// Wrap, when set, wraps the device's backend (tests inject failures).
	Wrap func(device.Backend) device.Backend
}

// RunNativeWorker is the main function of a worker process: it opens the
// local device (WebGPU, or Vulkan with o.Vulkan) and serves the server's
// pipes until they close. Failing to open the device is reported to the
// server as an Error frame.
func RunNativeWorker(o NativeWorkerOptions) error {
	requests, replies := WorkerPipes()
	be, closeDev, err := openLocal(o)
	if err != nil {
		writeWorkerFrame(replies, proto.Encode(0, proto.Errorf(proto.CodeUnavailable, "%v", err)))
		return err
	}
	defer closeDev()
	if o.Wrap != nil {
		be = o.Wrap(be)
	}
	core := device.New(be, device.Options{MemoryBytes: o.MemoryBytes, CacheBytes: o.CacheBytes,
		UncheckedKernels: os.Getenv(UncheckedKernelsEnv) == "1"})
	return ServeWorker(requests, replies, core)
}

// openLocal opens the worker's device and returns its backend.
func openLocal(o NativeWorkerOptions) (device.Backend, func() error, error) {
	if o.Vulkan {
		// The protocol has no feature for subgroup matrices yet: the device
		// keeps them off, so that it refuses kernels that use them.
		dev, err := vulkan.Open(vulkan.Options{NoSubgroupMatrix: true})
		if err != nil {
			return nil, nil, err
		}
		return device.Vulkan(dev), dev.Close, nil
	}
	capBytes, err := runtime.MaxBufferCap()
	if err != nil {
		return nil, nil, err
	}
	dev, err := webgpu.Open(webgpu.Options{Backend: o.Backend, MaxBufferBytes: capBytes})
	if err != nil {
		return nil, nil, err
	}
	return device.Native(dev), dev.Close, nil
}
