package mount

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

// ControlSocket is the name, in the store directory, of the unix socket
// through which the CLI reaches a running mount (snapshot commands,
// stats). It answers only the user who mounted the store, and root: the
// socket file is mode 0600, and every connection's peer credentials
// (SO_PEERCRED) are checked as well, since the mode alone would let a
// process that inherited a descriptor in.
const ControlSocket = "control.sock"

// Control errors, matched with errors.Is on the client side too: the
// server sends the code and Call maps it back.
var (
	ErrNotMounted = errors.New("store is not mounted")
	ErrDenied     = errors.New("control socket: permission denied")
)

// Request is one control call: one JSON object per line.
type Request struct {
	Op   string     `json:"op"` // "create", "list", "delete", "rename", "stats", "usage", "log", "cat", "restore", "deleted", "verify"
	Name ByteString `json:"name,omitempty"`
	To   ByteString `json:"to,omitempty"`
	// Path names a file for log, cat and restore (a directory for
	// deleted): relative to the tree root (the mount point),
	// slash-separated.
	Path ByteString `json:"path,omitempty"`
	// File names a store file for log, cat and restore (see Target).
	File uint64  `json:"file,omitempty"`
	Spec RevSpec `json:"spec,omitempty"` // cat's revision; restore's Rev (none: the newest)
	// Rows asks for log's revisions as binary rows after the answer
	// (history_rows.go) rather than in it.
	Rows bool `json:"rows,omitempty"`
}

// Response answers a Request.
type Response struct {
	Error     ByteString     `json:"error,omitempty"` // a message naming a file or snapshot: bytes
	Code      string         `json:"code,omitempty"`  // see codes
	Snapshot  *SnapshotInfo  `json:"snapshot,omitempty"`
	Snapshots []SnapshotInfo `json:"snapshots,omitempty"`
	Stats     *Stats         `json:"stats,omitempty"`
	Log       *FileLog       `json:"log,omitempty"`
	Revision  *RevInfo       `json:"revision,omitempty"`
	File      *FileInfo      `json:"file,omitempty"` // the file of cat's and restore's Revision
	Deleted   []DeletedFile  `json:"deleted,omitempty"`
	// DataBytes says that this many raw bytes (cat's content) follow the
	// response's line on the socket.
	DataBytes int64                    `json:"data_bytes,omitempty"`
	Usages    []objstore.SnapshotUsage `json:"usages,omitempty"`
	Verify    *VerifyMessage           `json:"verify,omitempty"` // see control_verify.go
}

// SnapshotInfo describes one snapshot to the CLI.
type SnapshotInfo struct {
	ID   uint64     `json:"id"`
	Name ByteString `json:"name"`
	Time time.Time  `json:"time"`
}

func infoOf(s index.Snapshot) SnapshotInfo {
	return SnapshotInfo{ID: uint64(s.ID), Name: ByteString(s.Name), Time: time.Unix(0, s.Time).UTC()}
}

// codes carry sentinel errors across the socket; the first that matches
// wins (ErrNoHistory wraps index.ErrNotFound). A refusal of the live
// file system (a restore over a read-only file) is os.ErrPermission.
var codes = []struct {
	code string
	err  error
}{
	{"no_history", ErrNoHistory}, {"is_dir", ErrIsDir}, {"need_rev", ErrNeedRev}, {"read_only", objstore.ErrReadOnly},
	{"exists", index.ErrExists}, {"not_found", index.ErrNotFound}, {"bad_name", index.ErrBadName}, {"denied", ErrDenied},
	{"permission", os.ErrPermission},
}

func codeOf(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// errOfCode returns the sentinel error a code carries.
func errOfCode(code string) (error, bool) {
	for _, c := range codes {
		if c.code == code {
			return c.err, true
		}
	}
	return nil, false
}

// Controller is what the control socket serves: the mount's snapshots,
// statistics and file histories. Paths of Log, Cat and Restore are
// relative to the tree root, slash-separated.
type Controller interface {
	CreateSnapshot(ctx context.Context, name string) (index.Snapshot, error)
	ListSnapshots(ctx context.Context) ([]index.Snapshot, error)
	DeleteSnapshot(ctx context.Context, name string) error
	RenameSnapshot(ctx context.Context, from, to string) error
	Stats(ctx context.Context) (Stats, error)
	// SnapshotUsages says what each snapshot alone holds.
	SnapshotUsages(ctx context.Context) ([]objstore.SnapshotUsage, error)
	// Log lists every revision of a file, oldest first.
	Log(ctx context.Context, t Target) (FileLog, error)
	// Cat returns the revision spec picks and its content, which the
	// caller closes.
	Cat(ctx context.Context, t Target, spec RevSpec) (FileRev, Text, error)
	// Restore records revision rev's content (nil: the newest, for a
	// deleted file only) as the file's next revision, with rev as its
	// second parent, and returns it; a deleted file is made again.
	Restore(ctx context.Context, t Target, rev *uint32) (FileRev, error)
	// Deleted lists the deleted files whose history is still in the
	// store, whose last path is dir or under it, newest first.
	Deleted(ctx context.Context, dir string) ([]DeletedFile, error)
}

// controller is the Controller of a store: snapshots and statistics from
// the snapshotter, histories from the historian.
type controller struct {
	*snapshotter
	*historian
}

// rowLogger is a Controller that answers log with rows (history_rows.go).
type rowLogger interface {
	logRows(ctx context.Context, t Target, b []byte) (FileLog, []byte, error)
}

var _ rowLogger = controller{}

// controlServer serves a Controller on the control socket.
type controlServer struct {
	ln    *net.UnixListener
	path  string
	owner uint32
	c     Controller
	log   *slog.Logger
	wg    sync.WaitGroup
	// mu guards conns, the connections being served and what each is
	// doing, and closed.
	mu     sync.Mutex
	conns  map[*net.UnixConn]connPhase
	closed bool
	// stop ends the verifications running when Close is called (they
	// only read the store).
	stopCtx context.Context
	stop    context.CancelFunc
	// bufs keeps the buffers log rows are encoded into between calls (a
	// log of 10,000 revisions is about 300 KB): a call then leaves no
	// buffer of that size for the garbage collector. Of *[]byte.
	bufs sync.Pool
}

// serveControl listens on dir/ControlSocket, answering owner and root.
func serveControl(dir string, owner uint32, c Controller, log *slog.Logger) (*controlServer, error) {
	path := filepath.Join(dir, ControlSocket)
	_ = os.Remove(path) // a stale socket of a killed mount; we hold the store lock
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	s := &controlServer{ln: ln, path: path, owner: owner, c: c, log: log, conns: map[*net.UnixConn]connPhase{}}
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Close stops listening, removes the socket and waits for calls in
// flight: each connection takes no further request, a request running
// finishes, and its answer has closeWriteGrace from when it starts (or
// from Close, if it had started) to be taken. A cat streams its revision
// as the caller reads it, and a caller that stopped reading (a pipe into
// a pager left open, a stopped job) held the unmount until its shutdown
// deadline; it now gets a short read ("unexpected EOF"). A verification
// running is stopped.
func (s *controlServer) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	s.closed = true
	now := time.Now()
	for conn, ph := range s.conns {
		switch ph {
		case phaseIdle:
			_ = conn.SetReadDeadline(now)
		case phaseAnswering:
			_ = conn.SetWriteDeadline(now.Add(closeWriteGrace))
		}
	}
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	return err
}

// connPhase is what a connection of the control socket is doing.
type connPhase int

const (
	phaseIdle      connPhase = iota // waiting for a request
	phaseRunning                    // running one
	phaseAnswering                  // writing its answer
)

// enter moves conn to phase ph, and reports false when the server is
// closed and conn is to take no further request (ph is phaseIdle or
// phaseRunning). An answer begun after Close gets closeWriteGrace.
func (s *controlServer) enter(conn *net.UnixConn, ph connPhase) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[conn] = ph
	if !s.closed {
		return true
	}
	if ph == phaseAnswering {
		_ = conn.SetWriteDeadline(time.Now().Add(closeWriteGrace))
		return true
	}
	return false
}

// closeWriteGrace is how long Close lets a connection take its answer.
const closeWriteGrace = 5 * time.Second

func (s *controlServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return
		}
		s.conns[conn] = phaseIdle
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, conn)
				s.mu.Unlock()
				conn.Close()
			}()
			s.handle(conn)
		}()
	}
}

// allowed says whether a peer with uid may use a mount owned by owner.
func allowed(uid, owner uint32) bool { return uid == 0 || uid == owner }

// peerUID returns the uid of the process at the other end of conn.
func peerUID(conn *net.UnixConn) (uint32, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return cred.Uid, nil
}

// maxRequest bounds a request line.
const maxRequest = 64 << 10

func (s *controlServer) handle(conn *net.UnixConn) {
	enc := json.NewEncoder(conn)
	uid, err := peerUID(conn)
	if err != nil || !allowed(uid, s.owner) {
		s.log.Warn("control socket: refused a caller", "uid", uid, "err", err)
		_ = enc.Encode(Response{Error: ByteString(ErrDenied.Error()), Code: "denied"})
		return
	}
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 4096), maxRequest)
	for s.enter(conn, phaseIdle) && sc.Scan() {
		if !s.enter(conn, phaseRunning) {
			return // closed: no further request (one already sent, read ahead)
		}
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			_ = enc.Encode(Response{Error: ByteString("bad request: " + err.Error())})
			return
		}
		if v, ok := s.c.(verifier); ok && req.Op == "verify" {
			s.enter(conn, phaseAnswering) // it answers as it goes
			if !s.streamVerify(enc, v) {
				return
			}
			continue
		}
		bp, _ := s.bufs.Get().(*[]byte)
		if bp == nil {
			bp = new([]byte)
		}
		resp, data, text := s.do(req, (*bp)[:0])
		s.enter(conn, phaseAnswering)
		err := enc.Encode(resp)
		switch {
		case err == nil && text != nil:
			_, err = text.WriteTo(conn)
		case err == nil:
			_, err = conn.Write(data)
		}
		if text != nil {
			text.Close()
		}
		if req.Op == "log" && cap(data) <= maxPooledRows { // data is the pooled buffer, grown
			*bp = data[:0]
		}
		s.bufs.Put(bp)
		if err != nil {
			return
		}
	}
}

// maxPooledRows bounds a buffer kept in rowBufs.
const maxPooledRows = 4 << 20

// do runs one request; data or text (a cat's), if any, follows the
// response. A log's rows are appended to buf.
func (s *controlServer) do(req Request, buf []byte) (Response, []byte, Text) {
	ctx := context.Background()
	var resp Response
	var err error
	switch req.Op {
	case "create":
		var snap index.Snapshot
		if snap, err = s.c.CreateSnapshot(ctx, string(req.Name)); err == nil {
			info := infoOf(snap)
			resp.Snapshot = &info
		}
	case "list":
		var list []index.Snapshot
		list, err = s.c.ListSnapshots(ctx)
		resp.Snapshots = make([]SnapshotInfo, len(list))
		for i, sn := range list {
			resp.Snapshots[i] = infoOf(sn)
		}
	case "delete":
		err = s.c.DeleteSnapshot(ctx, string(req.Name))
	case "rename":
		err = s.c.RenameSnapshot(ctx, string(req.Name), string(req.To))
	case "usage":
		resp.Usages, err = s.c.SnapshotUsages(ctx)
	case "stats":
		var st Stats
		if st, err = s.c.Stats(ctx); err == nil {
			resp.Stats = &st
		}
	case "deleted":
		resp.Deleted, err = s.c.Deleted(ctx, string(req.Path))
	case "log", "cat", "restore":
		var data []byte
		var text Text
		if resp, data, text, err = s.history(ctx, req, buf); err == nil {
			return resp, data, text
		}
	default:
		err = fmt.Errorf("unknown operation %q", req.Op)
	}
	if err != nil {
		return Response{Error: ByteString(err.Error()), Code: codeOf(err)}, nil, nil
	}
	return resp, nil, nil
}

// history runs log, cat and restore.
func (s *controlServer) history(ctx context.Context, req Request, buf []byte) (Response, []byte, Text, error) {
	var resp Response
	t := Target{Path: string(req.Path), File: req.File}
	switch req.Op {
	case "log":
		if lr, ok := s.c.(rowLogger); ok && req.Rows {
			l, data, err := lr.logRows(ctx, t, buf)
			resp.Log, resp.DataBytes = &l, int64(len(data))
			return resp, data, nil, err
		}
		l, err := s.c.Log(ctx, t)
		resp.Log = &l
		return resp, nil, nil, err
	case "cat":
		r, text, err := s.c.Cat(ctx, t, req.Spec)
		if err != nil {
			return resp, nil, nil, err
		}
		resp.File, resp.Revision, resp.DataBytes = &r.FileInfo, &r.Revision, text.Size()
		return resp, nil, text, nil
	}
	r, err := s.c.Restore(ctx, t, req.Spec.Rev)
	resp.File, resp.Revision = &r.FileInfo, &r.Revision
	return resp, nil, nil, err
}

// Call sends req to the mount of the store in dir and returns its
// answer. It fails with an error matching ErrNotMounted when no mount
// listens there (no socket, or a stale one), and with the sentinel
// errors of package index (ErrExists, ErrNotFound, ErrBadName) or
// ErrDenied as the mount reports them.
func Call(ctx context.Context, dir string, req Request) (Response, error) {
	resp, _, err := callData(ctx, dir, req)
	return resp, err
}

// callData is Call returning the raw bytes that follow the response.
func callData(ctx context.Context, dir string, req Request) (Response, []byte, error) {
	resp, text, err := callText(ctx, dir, req)
	if err != nil || text == nil {
		return resp, nil, err
	}
	defer text.Close()
	data := &appendWriter{b: make([]byte, 0, text.size)}
	if _, err := text.WriteTo(data); err != nil {
		return resp, nil, err
	}
	return resp, data.b, nil
}

// callText is Call returning, when the response says raw bytes follow
// it, a Text that reads them from the connection, which it keeps open
// until the Text is closed.
func callText(ctx context.Context, dir string, req Request) (_ Response, _ *connText, err error) {
	conn, err := dial(ctx, dir)
	if err != nil {
		return Response{}, nil, err
	}
	defer func() {
		if err != nil {
			conn.Close()
		}
	}()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// A refused caller's request may fail to send (the server answered
	// and hung up first): its answer is still there to read.
	werr := json.NewEncoder(conn).Encode(req)
	var resp Response
	dec := json.NewDecoder(conn)
	if err := dec.Decode(&resp); err != nil {
		return Response{}, nil, fmt.Errorf("control socket of %s: %w", dir, errors.Join(werr, err))
	}
	if resp.Error != "" {
		if e, ok := errOfCode(resp.Code); ok {
			return resp, nil, &kindError{msg: string(resp.Error), kind: e}
		}
		return resp, nil, errors.New(string(resp.Error))
	}
	if resp.DataBytes <= 0 {
		conn.Close()
		return resp, nil, nil
	}
	if resp.DataBytes > maxData {
		return resp, nil, fmt.Errorf("control socket of %s: answer of %d bytes", dir, resp.DataBytes)
	}
	// The data follows the response line's newline, which the decoder
	// leaves unread; it may have read into the data too.
	return resp, &connText{conn: conn, r: io.MultiReader(dec.Buffered(), conn), size: resp.DataBytes, dir: dir}, nil
}

// dial connects to the control socket of the store in dir; no mount
// listening there gives an error matching ErrNotMounted.
func dial(ctx context.Context, dir string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", filepath.Join(dir, ControlSocket))
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("%s: %w", dir, ErrNotMounted)
	}
	if err != nil {
		return nil, fmt.Errorf("control socket of %s: %w", dir, err)
	}
	return conn, nil
}

// maxData bounds the raw bytes of an answer: the largest revision a mount
// records (maxRecordBytes).
const maxData = maxRecordBytes
